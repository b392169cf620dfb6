"""The report as a person sees it: opened in headless Chromium (Debian's
`chromium`), every chart drawn where the page puts it (pixels in its box on
the screenshot), no error in the page's console, nothing fetched but the
file itself."""

from __future__ import annotations

import io
from importlib import resources
from pathlib import Path

import pytest
from support.shared import LIFTBRIDGE
from test_chart_specs import vega_lite_errors

from lbparse.report import build_model, render_html
from lbparse.report.browser import chromium, look
from lbparse.report.charts import chart_list

# slow: each test starts a headless Chromium (about 3 s here, 10 s for the module).
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        chromium() is None, reason="Chromium is not installed (make install-system)"
    ),
]
Image = pytest.importorskip("PIL.Image", reason="pillow is not installed (make install-python)")

SHORT = LIFTBRIDGE / "samples" / "short.pcapng"


def inked(png: bytes, box: dict[str, float]) -> tuple[float, int]:
    """Share of the box's pixels that are not the card's white, and how many colours."""
    img = Image.open(io.BytesIO(png)).convert("RGB")
    region = img.crop(
        (int(box["x"]), int(box["y"]), int(box["x"] + box["width"]), int(box["y"] + box["height"]))
    )
    pixels = list(region.get_flattened_data())
    ink = [p for p in pixels if min(p) < 235]
    return len(ink) / max(1, len(pixels)), len(set(ink))


def check_page(page: Path, model: dict) -> None:
    seen = look(page)
    assert seen.rendered == "ok", seen.rendered
    assert seen.errors == []
    assert [u for u in seen.requests if not u.startswith("file://")] == []
    drawn = [c.id for c in chart_list(model) if c.spec is not None]
    for c in chart_list(model):
        if c.spec is not None:  # (made without Altair's validation: test_chart_specs.py)
            assert vega_lite_errors(c.spec) == [], c.id
    empty = [c.id for c in chart_list(model) if c.spec is None]
    assert [c["id"] for c in seen.charts] == drawn
    assert seen.empty_notes == len(empty)
    img = Image.open(io.BytesIO(seen.png))
    assert img.size[0] == 1400 and img.size[1] > 2000
    for box in seen.charts:
        assert box["marks"] >= 1 and box["width"] > 300 and box["height"] > 50, box
        share, colours = inked(seen.png, box)
        assert share > 0.02 and colours >= 3, (box["id"], share, colours)


@pytest.mark.parametrize("which", ["bundled sample", "shared short run"])
def test_every_chart_renders_in_chromium(which: str, tmp_path: Path) -> None:
    if which == "bundled sample":
        capture = Path(str(resources.files("lbparse.examples").joinpath("sample.pcap")))
    else:
        if not SHORT.exists():
            pytest.skip(f"shared material missing: {SHORT}")
        capture = SHORT
    model = build_model([str(capture)])
    page = tmp_path / "report.html"
    page.write_text(render_html(model))
    check_page(page, model)


def test_a_blank_chart_would_be_seen(tmp_path: Path) -> None:
    """The check above is not blind: a page whose charts fail to draw fails it."""
    model = build_model([str(resources.files("lbparse.examples").joinpath("sample.pcap"))])
    page = tmp_path / "broken.html"
    page.write_text(
        render_html(model).replace("vegaEmbed('#chart-' + c.id", "vegaEmbed('#no-such-' + c.id")
    )
    seen = look(page)
    assert seen.rendered.startswith("error") or seen.errors
    share, _ = inked(seen.png, seen.charts[0])
    assert share < 0.02


def test_screenshot_option_writes_the_pages_png(tmp_path: Path) -> None:
    from test_report import cli, sample_pcap

    page, png = tmp_path / "r.html", tmp_path / "r.png"
    res = cli("report", str(sample_pcap()), "-o", str(page), "--screenshot", str(png))
    assert res.returncode == 0 and b"the page in Chromium" not in res.stderr, res.stderr
    img = Image.open(png)
    assert img.format == "PNG" and img.size[0] == 1400 and img.size[1] > 2000
