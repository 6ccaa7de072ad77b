"""Write the sandbox kernels' logos (a prompt in a sand-coloured box) into
sandbox_kernel/frontdoors/kernel/logos/: ``logo-svg.svg`` and ``logo-64x64.png`` /
``logo-32x32.png``, drawn from the same shapes (the PNGs with Pillow, 8x supersampled).
JupyterLab's Launcher shows the SVG, Notebook 7 and VS Code the PNGs.

    python scripts/make_logos.py
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw

OUT = Path(__file__).resolve().parents[1] / "sandbox_kernel" / "frontdoors" / "kernel" / "logos"
BLUE, SAND, WHITE = "#21506e", "#e9c46a", "#ffffff"
# on a 64-unit square: the tile, the box (stroke 4), the prompt's chevron and underscore (stroke 4, round ends)
TILE = (2, 2, 62, 62, 13)
BOX = (11, 15, 53, 49, 5)
CHEVRON = [(20, 25), (28, 32), (20, 39)]
UNDERSCORE = [(32, 40), (44, 40)]
STROKE = 4

SVG = f"""<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64" viewBox="0 0 64 64">
  <rect x="{TILE[0]}" y="{TILE[1]}" width="{TILE[2] - TILE[0]}" height="{TILE[3] - TILE[1]}" rx="{TILE[4]}" fill="{BLUE}"/>
  <rect x="{BOX[0]}" y="{BOX[1]}" width="{BOX[2] - BOX[0]}" height="{BOX[3] - BOX[1]}" rx="{BOX[4]}" fill="none"
        stroke="{SAND}" stroke-width="{STROKE}"/>
  <polyline points="{' '.join(f'{x},{y}' for x, y in CHEVRON)}" fill="none" stroke="{WHITE}" stroke-width="{STROKE}"
            stroke-linecap="round" stroke-linejoin="round"/>
  <line x1="{UNDERSCORE[0][0]}" y1="{UNDERSCORE[0][1]}" x2="{UNDERSCORE[1][0]}" y2="{UNDERSCORE[1][1]}"
        stroke="{WHITE}" stroke-width="{STROKE}" stroke-linecap="round"/>
</svg>
"""


def png(size: int) -> Image.Image:
    scale = size * 8 / 64
    image = Image.new("RGBA", (size * 8, size * 8), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)

    def s(*values: float) -> list[float]:
        return [v * scale for v in values]

    draw.rounded_rectangle(s(*TILE[:4]), radius=TILE[4] * scale, fill=BLUE)
    half = STROKE / 2
    draw.rounded_rectangle(s(BOX[0] - half, BOX[1] - half, BOX[2] + half, BOX[3] + half), radius=(BOX[4] + half) * scale,
                           outline=SAND, width=round(STROKE * scale))
    for line in (CHEVRON, UNDERSCORE):
        points = [tuple(s(*p)) for p in line]
        draw.line(points, fill=WHITE, width=round(STROKE * scale), joint="curve")
        for x, y in (points[0], points[-1]):  # round caps
            r = STROKE * scale / 2
            draw.ellipse((x - r, y - r, x + r, y + r), fill=WHITE)
    return image.resize((size, size), Image.LANCZOS)


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "logo-svg.svg").write_text(SVG)
    for size in (32, 64):
        png(size).save(OUT / f"logo-{size}x{size}.png", optimize=True)
    print(f"wrote {OUT}")
