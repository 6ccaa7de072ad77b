"""The byte bound on what the host holds of a request's IOPub messages (kernel_client/held.py)."""

from __future__ import annotations

import asyncio

import pytest

from sandbox_kernel.backends.kernel_client.held import IOPubQueue, approx_bytes

pytestmark = pytest.mark.unit


def display(text: str) -> dict:
    return {"header": {"msg_type": "display_data"}, "content": {"data": {"text/plain": text}, "metadata": {}}}


def test_approx_bytes_counts_strings_and_buffers():
    assert 1000 <= approx_bytes(display("x" * 1000)["content"]) < 1100
    assert approx_bytes({"buffers": [b"y" * 500]}) >= 500


async def test_the_reader_waits_past_the_bound_and_goes_on_as_the_relay_reads():
    queue = IOPubQueue(max_bytes=10_000)
    await asyncio.wait_for(queue.put(display("a" * 6000)), 1)  # under the bound: no wait
    second = asyncio.ensure_future(queue.put(display("b" * 6000)))  # over: taken, then waits
    await asyncio.sleep(0.01)
    assert not second.done() and queue.qsize() == 2
    assert (await queue.get())["content"]["data"]["text/plain"][0] == "a"
    await asyncio.wait_for(second, 1)
    assert (await queue.get())["content"]["data"]["text/plain"][0] == "b" and queue.held == 0


async def test_close_releases_a_waiting_reader_and_get_waits_for_a_message():
    queue = IOPubQueue(max_bytes=10)
    waiting = asyncio.ensure_future(queue.put(display("x" * 100)))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    queue.close()
    await asyncio.wait_for(waiting, 1)
    await asyncio.wait_for(queue.put(display("y" * 100)), 1)  # closed: never waits again
    getter = asyncio.ensure_future(IOPubQueue().get())
    await asyncio.sleep(0.01)
    assert not getter.done()
    getter.cancel()
