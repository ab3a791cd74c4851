"""The HTML reports as a person looks at them: opened from file:// in a real browser (Debian's
chromium driven by Playwright; the browser tests skip when either is absent), with no console
error, no request outside the report folder and its source video, every image decoded, the kind
and noun filters, the time axis and the video jump working, and the page fitting a 400 px-wide
phone. Screenshots (desktop and phone) are left in each test's temp folder.

The reports are made by the installed console script from inputs drawn here: a 10 s clip (a red
box visits the lower right from 2 s to 7 s, a blue box the upper left from 3 s to 4 s, and the
light goes up at 8 s), under a file name that is an HTML injection; a synthetic pair with one
object gone and another new; and the parking-lot example. Where ../shared/media exists, the
timeline of a real parking-lot clip (with a watched region) is opened too.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import cv2
import numpy as np
import pytest
from conftest import REPO, draw_box, media, textured_background
from console import run_spotdiff

from spotdiff_cli.report.timeline import write_html

# A file name may hold any character but "/": this one is markup that would run a script.
HOSTILE = 'cam <img id="injected" src=x onerror=alert(1)> & "q"'
SCRIPT = "</script><script>alert(1)</script>"
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
RED, BLUE = (220, 40, 40), (40, 60, 220)


# -- inputs and reports ------------------------------------------------------------------------


def write_clip(path: Path) -> Path:
    """VP8 WebM, so the browser plays it (the jump test needs a seekable video)."""
    background = textured_background(240, 320, seed=3)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"VP80"), 10, (320, 240))
    assert writer.isOpened(), "OpenCV cannot write VP8 here"
    for i in range(100):
        image = background
        if 20 <= i < 70:
            image = draw_box(image, 220, 150, 60, 50, RED)
        if 30 <= i < 40:
            image = draw_box(image, 30, 20, 50, 40, BLUE)
        if i >= 80:  # the lights go up: a whole-frame change, with no noun
            image = np.clip(image.astype(np.int16) + 60, 0, 255).astype(np.uint8)
        writer.write(cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    writer.release()
    return path


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("html")
    clip = write_clip(d / f"{HOSTILE}.webm")
    roi = "10,10,300,220"
    proc = run_spotdiff(
        "video", clip, "--every", "1s", "--no-recognise", "--roi", roi, "--out", d / "timeline"
    )
    assert proc.returncode == 0, proc.stderr

    scene = textured_background(240, 320, seed=5)
    before = d / "before.png"
    after = d / f"{HOSTILE}.png"
    cv2.imwrite(str(before), cv2.cvtColor(draw_box(scene, 30, 30, 60, 50, RED), cv2.COLOR_RGB2BGR))
    cv2.imwrite(
        str(after), cv2.cvtColor(draw_box(scene, 220, 150, 60, 50, BLUE), cv2.COLOR_RGB2BGR)
    )
    pair = run_spotdiff("caption", before, after, "--no-recognise", "--out", d / "pair")
    assert pair.returncode == 0, pair.stderr
    example = REPO / "examples" / "parking-lot"
    lot = run_spotdiff("caption", example / "before.jpg", example / "after.jpg", "--out", d / "lot")
    assert lot.returncode == 0, lot.stderr
    return {"clip": clip, "timeline": d / "timeline", "pair": d / "pair", "lot": d / "lot"}


# -- the page without a browser ----------------------------------------------------------------


def _timeline_dict(source: str, text: str) -> dict:
    event = {
        "id": 1, "start": 2.0, "end": 3.0, "start_tc": "00:00:02.000", "end_tc": "00:00:03.000",
        "start_frame": None, "end_frame": None, "text": text, "kind": text, "noun": text,
        "sentences": [], "boxes": [], "picture": None, "clip": None,
        "pair_times": {"before": 1.0, "after": 2.0},
    }  # fmt: skip
    return {
        "complete": True,
        "settings": {},
        "sources": [
            {
                "source": source,
                "path": source,
                "info": {"kind": "folder"},
                "complete": True,
                "error": None,
                "warnings": [text],
                "samples": 3,
                "pairs_analysed": 1,
                "seconds": 0.1,
                "events": [event],
                "processed_until": 3.0,
            }  # fmt: skip
        ],
    }


def test_timeline_page_escapes_names_and_sentences_and_keeps_them_out_of_the_script(tmp_path):
    page = write_html(_timeline_dict(f"/data/{HOSTILE}.mp4", SCRIPT), tmp_path).decode()
    assert '<img id="injected"' not in page and "&lt;img id=&#34;injected&#34; src=x" in page
    assert SCRIPT not in page and "&lt;/script&gt;&lt;script&gt;alert(1)" in page
    # One script, ours: nothing of the report is inside it.
    markup, script = page.split("<script>")
    assert page.count("<script") == 1 and "alert" not in script
    # A folder has no video to play.
    assert "<video" not in markup and "#t=" not in markup


@pytest.mark.parametrize(
    "name, codec, plays",
    [
        ("cam.avi", None, False),
        ("cam.mkv", "h264", False),
        ("cam.mp4", "mpeg4", False),  # MPEG-4 Part 2 in an MP4: old CCTV exports
        ("cam.mp4", None, True),
        ("cam.MP4", "h264", True),
        ("cam.webm", "vp9", True),
    ],
)
def test_a_video_the_browser_cannot_play_is_a_note_and_plain_times(tmp_path, name, codec, plays):
    """An AVI (or an MP4 of a codec no browser decodes) gave a player that spins for ever and
    "play from" links that did nothing: the page says to open the file in a player, at the
    event's time, and has no player or jump link for it."""
    clip = tmp_path / name
    clip.write_bytes(b"")
    data = _timeline_dict(str(clip), "a red object appeared")
    data["sources"][0]["info"] = {"kind": "video", **({"codec": codec} if codec else {})}
    data["sources"][0]["events"][0]["sentences"] = [
        {"start": 2.0, "start_tc": "00:00:02.000", "text": "a red object appeared", "kind": "x"},
        {"start": 2.5, "start_tc": "00:00:02.500", "text": "it moved", "kind": "x"},
    ]
    page = write_html(data, tmp_path / "report").decode()
    markup = page.split("<script>")[0]
    if plays:
        assert "<video" in markup and "▶ play from 00:00:02.000" in markup
        assert "cannot play" not in markup
        return
    assert "<video" not in markup and 'class="jump"' not in markup and "#t=" not in markup
    note = re.search(r'<p class="note noplay">(.*?)</p>', markup, re.S)
    assert note, markup
    text = re.sub(r"<[^>]+>", "", note[1])
    assert text.startswith(f"Your browser cannot play {name} (")
    assert text.endswith("open it in a player (VLC, mpv) at an event's time.")
    assert f"in a player: {name} at 00:00:02.000" in markup
    assert "00:00:02.500 it moved" in re.sub(r"<[^>]+>", "", markup)  # a plain time, no link


# -- in the browser ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (the dev extra)")
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("needs Debian's chromium (scripts/bootstrap.sh installs it)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Visit:
    """A page opened from file://, with what it said on the console and what it asked for."""

    def __init__(self, browser, html: Path, width: int, height: int = 900):
        self.page = browser.new_page(viewport={"width": width, "height": height})
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(html.as_uri())
        self.page.wait_for_load_state("load")

    def decoded_widths(self) -> list[int]:
        """naturalWidth of every <img>, each loaded and decoded (lazy ones too)."""
        return self.page.evaluate(
            """() => Promise.all([...document.images].map(async (img) => {
                 img.loading = "eager"; await img.decode(); return img.naturalWidth; }))"""
        )

    def visible(self, selector: str) -> list[str]:
        return self.page.eval_on_selector_all(
            selector,
            "els => els.filter(e => e.offsetParent !== null).map(e => e.id || e.dataset.n)",
        )

    def check_clean(self, allowed: list[Path]) -> None:
        assert self.errors == []
        assert requests_outside(self.requests, allowed) == []

    def fits(self, name: str, out: Path) -> int:
        self.page.screenshot(path=str(out / name), full_page=True)
        return self.page.evaluate("document.documentElement.scrollWidth")


def requests_outside(urls: list[str], allowed: list[Path]) -> list[str]:
    """The URLs a page asked for that are neither ``data:`` nor a file in or under ``allowed``.
    Both sides are compared resolved: the page links the video by the path it was given (say
    ../shared/media/x.mp4) while a test may name it resolved, and ../shared may be a link."""
    roots = [a.resolve() for a in allowed]
    outside = []
    for url in urls:
        parsed = urlparse(url)
        if parsed.scheme == "data":
            continue
        path = Path(unquote(parsed.path)).resolve()
        if parsed.scheme != "file" or not any(path == a or a in path.parents for a in roots):
            outside.append(url)
    return outside


def test_requests_are_compared_by_where_they_lead_so_a_linked_media_folder_is_allowed(tmp_path):
    real = tmp_path / "data" / "media"
    real.mkdir(parents=True)
    (real / "clip.mp4").write_bytes(b"")
    (tmp_path / "shared").symlink_to(tmp_path / "data")  # ../shared as a link, as on some machines
    linked = tmp_path / "shared" / "media" / "clip.mp4"
    report = tmp_path / "report"
    report.mkdir()
    asked = [(report / "timeline.html").as_uri(), linked.as_uri(), "data:image/png;base64,AA"]
    assert requests_outside(asked, [report, linked.resolve()]) == []
    assert requests_outside(asked, [report, linked]) == []
    elsewhere = (tmp_path / "data" / "other.mp4").as_uri()
    assert requests_outside([elsewhere, "https://example.com/x.js"], [report, linked]) == [
        elsewhere,
        "https://example.com/x.js",
    ]


def test_timeline_page_in_a_browser(browser, reports, tmp_path):
    folder = reports["timeline"]
    data = json.loads((folder / "timeline.json").read_text())
    events = data["sources"][0]["events"]
    kinds = {e["kind"] for e in events}
    assert {"visited", "lighting"} <= kinds, events
    html = folder / "timeline.html"

    desk = Visit(browser, html, 1280)
    widths = desk.decoded_widths()
    assert len(widths) == 2 * sum(1 for e in events if e["picture"]) and min(widths) > 0
    # The hostile file name is text, not markup.
    assert desk.page.locator("#injected").count() == 0
    assert desk.page.locator("h2").first.inner_text() == f"{HOSTILE}.webm"
    # The watched region is drawn over every picture; the source video is on the page.
    assert desk.page.locator("svg.overlay rect.roi").count() == len(widths)
    assert desk.page.locator("video").count() == 1

    every = [f"s1-e{e['id']}" for e in events]
    assert desk.visible("article.event") == every
    # Kind filter: only the lighting changes remain, on the cards and on the time axis.
    desk.page.click('.chips[data-filter=kind] .chip[data-value="lighting"]')
    lit = [f"s1-e{e['id']}" for e in events if e["kind"] == "lighting"]
    assert desk.visible("article.event") == lit and lit
    assert desk.page.locator("a.mark:visible").count() == len(lit)
    assert desk.page.inner_text("#shown") == str(len(lit))
    desk.page.click('.chips[data-filter=kind] .chip[data-value=""]')
    # Noun filter: the lighting changes have no noun, so "object" leaves only the boxes.
    desk.page.click('.chips[data-filter=noun] .chip[data-value="object"]')
    objects = [f"s1-e{e['id']}" for e in events if e["noun"] == "object"]
    assert desk.visible("article.event") == objects and objects != every
    desk.page.click('.chips[data-filter=noun] .chip[data-value=""]')
    assert desk.visible("article.event") == every

    # A mark on the time axis brings its event into view.
    last = every[-1]
    desk.page.evaluate("window.scrollTo(0, 0)")
    desk.page.click(f'a.mark[href="#{last}"]')
    top = desk.page.evaluate(f"document.getElementById('{last}').getBoundingClientRect().top")
    assert 0 <= top < 900
    # "play from" seeks the source video to the event's start.
    first = events[0]
    link = desk.page.locator(f"#s1-e{first['id']} a.jump").last
    assert link.get_attribute("href").endswith(f"#t={first['start']}")
    link.click()
    desk.page.wait_for_function(
        f"Math.abs(document.querySelector('video').currentTime - {first['start']}) < 0.5"
    )
    desk.check_clean([folder, reports["clip"]])
    assert desk.fits("timeline-desktop.png", tmp_path) <= 1280

    phone = Visit(browser, html, 400, 800)
    assert min(phone.decoded_widths()) > 0
    assert phone.fits("timeline-phone.png", tmp_path) <= 400
    phone.check_clean([folder, reports["clip"]])


def test_an_avi_source_in_a_browser_says_to_open_it_in_a_player(browser, reports, tmp_path):
    """The same clip as MJPG in an AVI: no broken player on the page, a note naming the file,
    and each event's time as text to look up in a player."""
    clip = tmp_path / "night cam.avi"
    cap = cv2.VideoCapture(str(reports["clip"]))
    writer = cv2.VideoWriter(str(clip), cv2.VideoWriter_fourcc(*"MJPG"), 10, (320, 240))
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        writer.write(frame)
    writer.release()
    cap.release()
    out = tmp_path / "avi"
    proc = run_spotdiff("video", clip, "--every", "1s", "--no-recognise", "--out", out)
    assert proc.returncode == 0, proc.stderr
    events = json.loads((out / "timeline.json").read_text())["sources"][0]["events"]
    assert events
    visit = Visit(browser, out / "timeline.html", 1280)
    assert visit.page.locator("video").count() == 0
    assert visit.page.locator("a.jump").count() == 0
    note = visit.page.inner_text("p.noplay")
    assert note.startswith("Your browser cannot play night cam.avi (browsers play MP4, WebM")
    first = visit.page.inner_text(f"#s1-e{events[0]['id']} .at")
    assert first == f"in a player: night cam.avi at {events[0]['start_tc']}"
    assert min(visit.decoded_widths()) > 0
    visit.check_clean([out])


def test_caption_pages_in_a_browser(browser, reports, tmp_path):
    pair = reports["pair"]
    data = json.loads((pair / "report.json").read_text())
    kinds = [s["kind"] for s in data["sentences"]]
    assert {"appeared", "disappeared"} <= set(kinds), kinds

    desk = Visit(browser, pair / "report.html", 1280)
    assert desk.fits("caption-desktop.png", tmp_path) <= 1280
    widths = desk.decoded_widths()
    assert len(widths) == 3 and min(widths) > 0  # before, after, mask
    assert desk.page.locator("#injected").count() == 0
    assert HOSTILE in desk.page.inner_text(".inputs")
    numbers = [str(s["number"]) for s in data["sentences"]]
    assert desk.visible(".sentence") == numbers
    boxed = desk.page.locator(".box").count()
    assert boxed >= 2 * len({c["sentence"] for c in data["clusters"] if c["sentence"]})
    # Kind filter: only what appeared stays, in the list and boxed on the pictures.
    desk.page.click('.chips[data-filter=kind] .chip[data-value="appeared"]')
    appeared = [str(s["number"]) for s in data["sentences"] if s["kind"] == "appeared"]
    assert desk.visible(".sentence") == appeared
    shown = desk.page.eval_on_selector_all(
        ".box", "gs => gs.filter(g => getComputedStyle(g).display !== 'none').map(g => g.dataset.n)"
    )
    assert set(shown) == set(appeared)
    # The boxes can be hidden.
    desk.page.uncheck("#overlays")
    assert desk.page.locator("svg.overlay").first.is_hidden()
    desk.check_clean([pair])

    for name in ("pair", "lot"):
        phone = Visit(browser, reports[name] / "report.html", 400, 800)
        assert min(phone.decoded_widths()) > 0
        assert phone.fits(f"caption-{name}-phone.png", tmp_path) <= 400
        phone.check_clean([reports[name]])
        assert re.search(r"appeared", phone.page.inner_text(".sentences"))


def test_timeline_of_real_footage_in_a_browser(browser, tmp_path):
    clip = media("intel_car-detection.mp4")
    out = tmp_path / "real"
    proc = run_spotdiff("video", clip, "--roi", "200,150,400,250", "--out", out)
    assert proc.returncode == 0, proc.stderr
    events = json.loads((out / "timeline.json").read_text())["sources"][0]["events"]
    assert len(events) >= 3
    for width, height in ((1280, 900), (400, 800)):
        visit = Visit(browser, out / "timeline.html", width, height)
        assert min(visit.decoded_widths()) > 0
        assert visit.page.locator("article.event").count() == len(events)
        # The car's pictures: the watched region drawn over both halves of each.
        assert visit.page.locator("rect.roi").count() == 2 * len(events)
        last = f"s1-e{events[-1]['id']}"
        visit.page.click(f'a.mark[href="#{last}"]')
        top = visit.page.evaluate(f"document.getElementById('{last}').getBoundingClientRect().top")
        assert 0 <= top < height
        assert visit.fits(f"real-{width}.png", tmp_path) <= width
        visit.check_clean([out, clip.resolve()])


def test_the_search_box_filters_cards_by_words_and_the_summary_links_them(browser, reports):
    """Issue 28: words typed in the box keep the cards (and time-axis marks) whose sentences,
    noun or kind hold each of them; no network, no model. The summary's links lead to cards."""
    folder = reports["timeline"]
    events = json.loads((folder / "timeline.json").read_text())["sources"][0]["events"]
    desk = Visit(browser, folder / "timeline.html", 1280)
    every = [f"s1-e{e['id']}" for e in events]
    assert desk.page.locator("#find").is_visible()
    desk.page.fill("#find", "lighting")
    lit = [f"s1-e{e['id']}" for e in events if "lighting" in (e["text"] + e["kind"]).lower()]
    assert desk.visible("article.event") == lit and lit != every
    assert desk.page.locator("a.mark:visible").count() == len(lit)
    assert desk.page.inner_text("#shown") == str(len(lit))
    desk.page.fill("#find", "the zebra")
    assert desk.visible("article.event") == []
    desk.page.fill("#find", "")
    assert desk.visible("article.event") == every
    links = desk.page.eval_on_selector_all(".summary a", "as => as.map(a => a.hash.slice(1))")
    assert links and set(links) <= set(every)
    desk.check_clean([folder, reports["clip"].parent])
