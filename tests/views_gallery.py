"""Pictures of crashlab's views as a person sees them, to look at before a view change lands.

    python -m tests.views_gallery OUT [--run-dir RUN]...

For each bundled example (inspect's, and replay --list's in the terminal only) it writes, under OUT:
- ``NAME.COLS.txt`` and ``NAME.COLS.png``: the terminal view in a real tmux pane 80 and 160
  columns wide (colours kept), drawn by headless Chromium;
- ``NAME.md.png``: the ``--markdown`` view (and each RUN's report.md) rendered as GitHub renders an
  issue body (GFM through cmarkgfm, raw HTML kept, GitHub's stylesheet from the npm package
  github-markdown-css where npm can fetch it) and drawn by headless Chromium at GitHub's column width.

Not a test (Chromium is large): the tmux captures are asserted in tests/test_views_tmux.py; these
pictures are for eyes. Needs tmux, chromium, ``pip install cmarkgfm``.
"""

from __future__ import annotations

import argparse
import html
import io
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.text import Text

from tests.tmux_terminal import run_in_pane

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {
    "moe_align": ["inspect", "fixtures/synthetic/moe_align_out_of_range.nvcudmp"],
    "hang": ["inspect", "fixtures/synthetic/hang_no_exception.nvcudmp"],
}
#: Views with no --markdown twin: drawn in the terminal only.
TERMINAL_EXAMPLES = {
    "replay_list": ["replay", "fixtures/sglang_dumps/crash_dump_0.5.23.pkl", "--list"],
}
#: GitHub's issue column is about 900 pixels wide.
GITHUB_WIDTH = 900


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return name
    sys.exit("views_gallery: no chromium on PATH")


def _screenshot(page: Path, png: Path, width: int, height: int) -> None:
    subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={width},{height}", f"--screenshot={png}", page.as_uri()],
                   check=True, capture_output=True, timeout=120)


def _terminal_picture(name: str, args: list[str], columns: int, out: Path) -> None:
    screen = run_in_pane(args, columns, ROOT, colour=True)
    (out / f"{name}.{columns}.txt").write_text("\n".join(screen.lines) + "\n")
    console = Console(record=True, width=columns, file=io.StringIO(), force_terminal=True)
    for line in screen.lines:  # wrapped where the terminal wraps: at the last column
        text = Text.from_ansi(line)
        for piece in text.divide(range(columns, len(text), columns)) if len(text) > columns else [text]:
            console.print(piece, soft_wrap=True)
    page = out / f"{name}.{columns}.html"
    page.write_text(console.export_html(inline_styles=True))
    _screenshot(page, out / f"{name}.{columns}.png", columns * 10 + 60, 20 * len(screen.lines) + 80)


def _github_css(cache: Path) -> str:
    """GitHub's own Markdown stylesheet, from its npm package; plain HTML where npm cannot fetch it."""
    css = cache / "package" / "github-markdown-light.css"
    if not css.exists() and shutil.which("npm"):
        subprocess.run(["npm", "pack", "github-markdown-css", "--silent"], cwd=cache, capture_output=True)
        for tarball in cache.glob("github-markdown-css-*.tgz"):
            shutil.unpack_archive(tarball, cache)
    return css.read_text() if css.exists() else ""


def _markdown_picture(name: str, markdown: str, out: Path, css: str) -> None:
    import cmarkgfm
    from cmarkgfm.cmark import Options

    body = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    page = out / f"{name}.md.html"
    page.write_text(f"<!doctype html><meta charset=utf-8><title>{html.escape(name)}</title>"
                    f"<style>{css} body{{max-width:{GITHUB_WIDTH}px;margin:20px}}</style>"
                    f"<article class=markdown-body>{body}</article>")
    # <details> stay closed, as a reader first sees them.
    _screenshot(page, out / f"{name}.md.png", GITHUB_WIDTH + 40, 2400)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--run-dir", type=Path, action="append", default=[],
                        help="a crashlab serve run directory whose report.md to draw too")
    options = parser.parse_args()
    options.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as cache:
        css = _github_css(Path(cache))
    for name, args in EXAMPLES.items():
        for columns in (80, 160):
            _terminal_picture(name, args, columns, options.out)
        markdown = subprocess.run([sys.executable, "-m", "crashlab", *args, "--markdown"], cwd=ROOT,
                                  capture_output=True, text=True).stdout
        _markdown_picture(name, markdown, options.out, css)
    for name, args in TERMINAL_EXAMPLES.items():
        for columns in (80, 160):
            _terminal_picture(name, args, columns, options.out)
    for run in options.run_dir:
        _markdown_picture(f"run-{run.name}", (run / "report.md").read_text(), options.out, css)
    print(f"views_gallery: pictures in {options.out}")


if __name__ == "__main__":
    main()
