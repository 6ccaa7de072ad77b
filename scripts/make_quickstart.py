"""Write notebooks/quickstart.ipynb (the cells only; `make demo` executes it)."""

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

cells = [
    new_markdown_cell("# sandbox-kernel quickstart\n\nEvery cell of this notebook runs in a sandbox "
                      "(kernel **Python 3 (sandbox: local)**): a kernel process in a scratch directory "
                      "with a clean environment. Switch the kernel to `sandbox-docker` for a hardened container."),
    new_markdown_cell("## State lives in the sandbox, across cells"),
    new_code_cell("import os\nanswer = 21\nprint('working directory is a fresh scratch dir:', os.path.basename(os.getcwd()).startswith('sandbox-local-'))"),
    new_code_cell("answer * 2"),
    new_markdown_cell("## stdout and stderr"),
    new_code_cell("import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)"),
    new_markdown_cell("## A matplotlib figure, inline with no set-up"),
    new_code_cell("import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(4, 2.5))\n"
                  "ax.plot([1, 4, 2, 5], marker='o')\nax.set_title('drawn in the sandbox')\nplt.show()"),
    new_markdown_cell("## Rich displays: a pandas table and HTML"),
    new_code_cell("import pandas as pd\ndf = pd.DataFrame({'city': ['Lyon', 'Oslo', 'Quito'], 'temp_c': [14.5, 3.2, 19.0]})\ndf"),
    new_code_cell("from IPython.display import HTML, Markdown, display\n"
                  "display(HTML('<b>bold HTML</b> from the sandbox'))\ndisplay(Markdown('*and Markdown*'))"),
    new_markdown_cell("## Progress that updates in place\n\n`display(..., display_id=True).update(...)` and "
                      "`clear_output(wait=True)` work as in any kernel (tqdm relies on them). nbval cannot replay "
                      "display updates, so this cell's output is not compared by the test suite "
                      "(`tests/test_contract.py` and `tests/test_kernel.py` check them message by message)."),
    new_code_cell("import time\nbar = display('step 0/5', display_id=True)\nfor i in range(1, 6):\n"
                  "    time.sleep(0.05)\n    bar.update(f'step {i}/5 ' + '#' * i)",
                  metadata={"tags": ["nbval-ignore-output"]}),
    new_markdown_cell("## Errors show the sandbox's traceback; the state survives"),
    new_code_cell("def ratio(a, b):\n    return a / b\n\nratio(answer, 0)", metadata={"tags": ["raises-exception"]}),
    new_code_cell("answer"),
]
nb = new_notebook(cells=cells, metadata={
    "kernelspec": {"name": "sandbox-local", "display_name": "Python 3 (sandbox: local)", "language": "python"},
    "language_info": {"name": "python"},
})
nbformat.write(nb, "notebooks/quickstart.ipynb")
