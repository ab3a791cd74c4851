"""``spotdiff video --engine dask``: the timeline is the local run's, whoever computes it.

The real clips (../shared/media, skipped when absent) go through the console script with two
workers and 20 s chunks, so real chunk borders occur and events cross them; a synthetic clip
checks both comparison modes that carry state between samples. One LocalCluster is shared by
the in-process tests (a start costs a few seconds); the console script starts its own.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest
from conftest import media
from console import SPOTDIFF, check_clean_exit, ctrl_c_reaches_child, env, one_error_line
from console import run_spotdiff as spotdiff
from test_video import write_video

from spotdiff_cli.config import Settings, VideoConfig
from spotdiff_cli.report.timeline import timeline_to_dict
from spotdiff_cli.timeline import distributed
from spotdiff_cli.timeline.distributed import (
    MergeStep,
    chunk_starts,
    connect,
    describe_distributed,
    probe_source,
)
from spotdiff_cli.timeline.runs import describe_sources

CLIPS = (
    "intel_car-detection.mp4",
    "intel_one-by-one-person-detection.mp4",
    "dvrscan_traffic_camera.mp4",
)
CAR, PERSON = CLIPS[:2]
CHUNK = "20s"
# What differs by design: the time spent, and the frames decoded (chunks overlap).
WORK = ("seconds", "frames_decoded")


def _sources(report: dict, drop: tuple[str, ...] = WORK, event_drop: tuple[str, ...] = ()):
    out = []
    for source in report["sources"]:
        source = {k: v for k, v in source.items() if k not in drop}
        source["events"] = [
            {k: v for k, v in e.items() if k not in event_drop} for e in source["events"]
        ]
        out.append(source)
    return out


@pytest.fixture(scope="module")
def local_run(tmp_path_factory) -> Path:
    """The local run of the three real clips (console script, pictures written)."""
    out = tmp_path_factory.mktemp("local") / "report"
    proc = spotdiff("video", *[media(c) for c in CLIPS], "--out", out)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def client():
    """A Dask client of a two-worker LocalCluster, started the way --engine dask starts it."""
    with connect(VideoConfig(engine="dask", workers=2)) as dask_client:
        yield dask_client


# ~30 s (the real clips through a cluster): the synthetic-chunk tests below cover the merge in
# the default run, and the killed-worker test the real clip; this one runs with -m slow.
@pytest.mark.slow
def test_the_timeline_on_dask_is_the_local_one_on_the_real_clips(local_run, tmp_path):
    out = tmp_path / "report"
    proc = spotdiff(
        "video", *[media(c) for c in CLIPS], "--out", out, "--engine", "dask",
        "--workers", "2", "--chunk", CHUNK, "--jsonl", out / "events.jsonl", timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    local = json.loads((local_run / "timeline.json").read_text())
    dask = json.loads((out / "timeline.json").read_text())
    assert dask["settings"]["video"]["engine"] == "dask"
    assert dask["complete"] and _sources(dask) == _sources(local)  # events, ids, times, counts
    for source in dask["sources"]:
        for event in source["events"]:  # the pictures the workers drew, named by the merge
            picture = event["picture"]
            assert (out / picture).read_bytes() == (local_run / picture).read_bytes()
    # --jsonl: each final event once, in id order per source, written here as chunks merged.
    lines = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    for source in dask["sources"]:
        streamed = [x["event"]["id"] for x in lines if x["source"] == source["source"]]
        assert streamed == sorted(e["id"] for e in source["events"])
    # The chunks really were cut, and a local event runs across a border.
    person = next(s for s in local["sources"] if s["source"].endswith(PERSON))
    borders = chunk_starts(person["info"], VideoConfig(chunk=CHUNK))[1:]
    assert len(borders) >= 5
    assert any(e["start"] < b < e["end"] for e in person["events"] for b in borders)


def _executing_chunks(dask_worker) -> list[str]:
    return [str(k) for k, ts in dask_worker.state.tasks.items() if ts.state == "executing"]


def test_a_worker_killed_mid_chunk_loses_nothing(client, local_run):
    """SIGKILL the worker process running a chunk: Dask runs that chunk again on a worker the
    nanny restarts, and the timeline is still the local one. Uses the cluster through its
    address, as --scheduler does."""
    address = client.scheduler.address
    killed: list[tuple[int, str]] = []
    stop = threading.Event()

    def killer() -> None:
        while not stop.is_set() and not killed:
            running = client.run(_executing_chunks)
            for worker, keys in running.items():
                chunks = [k for k in keys if k.startswith("run_chunk")]
                if chunks:
                    pid = client.run(os.getpid, workers=[worker])[worker]
                    os.kill(pid, signal.SIGKILL)
                    killed.append((pid, chunks[0]))
                    return
            time.sleep(0.05)

    thread = threading.Thread(target=killer, daemon=True)
    # The 30 s car clip in three 10 s chunks: about a second of work each.
    settings = Settings(video=VideoConfig(engine="dask", scheduler=address, chunk="10s"))
    thread.start()
    try:
        results = describe_distributed([str(media(CAR))], settings)
    finally:
        stop.set()
        thread.join()
    assert killed, "no chunk was seen running"
    assert not psutil.pid_exists(killed[0][0]) or not _running(psutil.Process(killed[0][0]))
    local = json.loads((local_run / "timeline.json").read_text())
    expected = [s for s in _sources(local, event_drop=("picture",)) if s["source"].endswith(CAR)]
    assert _sources(timeline_to_dict(results, {}), event_drop=("picture",)) == expected


@pytest.fixture(scope="module")
def busy_clip(tmp_path_factory) -> Path:
    """30 s at 10 fps, quiet between three changes that each cross a 5 s chunk border: a box
    moving right over 5 s, a visit (arrives, stays, leaves) over 15 s, one moving down over
    25 s."""

    def boxes(i: int):
        if 30 <= i < 80:
            return [(10 + 3 * (i - 30), 40, 30, 30)]
        if 115 <= i < 175:
            return [(220, 150, 40, 40)]
        if 230 <= i < 290:
            return [(120, 20 + 2 * (i - 230), 30, 30)]
        return []

    d = tmp_path_factory.mktemp("busy")
    return write_video(d / "busy.avi", boxes, frames=300, fps=10)


@pytest.mark.parametrize(
    "compare, visit, rerun",
    # The background median absorbs an arrival, so no departure comes to end its visit: a
    # short --max-visit closes it, or the run would not be quiet again for 10 minutes.
    [("previous", "10m", False), ("background", "2s", False), ("previous", "10m", True)],
)
def test_short_chunks_of_a_synthetic_clip_merge_to_the_local_timeline(
    client, busy_clip, compare, visit, rerun, monkeypatch
):
    """5 s chunks: the background median needs 7 earlier samples at each chunk start
    (replayed), previous one; each event crosses a border and must come out once, numbered as
    locally. rerun: no chunk is taken as it ran, so each is run again from the checkpoint
    where the one before it stopped (the fallback path) - still the local timeline."""
    if rerun:
        monkeypatch.setattr(distributed, "_same_state", lambda a, b: False)
    video = VideoConfig(every="0.5s", compare=compare, max_visit=visit, chunk="5s")
    local = describe_sources([str(busy_clip)], Settings(video=video))
    steps: list[MergeStep] = []
    dask = describe_distributed(
        [str(busy_clip)],
        Settings(video=dataclasses.replace(video, engine="dask")),
        on_merge=lambda _source, step: steps.append(step),
        client=client,
    )
    assert len(local[0].events) >= 3
    assert len(chunk_starts(probe_source(str(busy_clip), Settings(video=video)), video)) == 6
    assert _sources(timeline_to_dict(dask, {})) == _sources(timeline_to_dict(local, {}))
    later = steps[1:]
    assert later and any(s.at > s.start for s in later)  # a hand-over after an open border
    assert all(s.rerun for s in later) if rerun else not any(s.rerun for s in later)


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("clip")
    return write_video(d / "clip.avi", lambda i: [(200, 150, 50, 40)] if 10 <= i < 20 else [], 30)


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:9", "no-port-here"])
def test_an_unreachable_scheduler_is_one_line_and_exit_1(clip, address):
    proc = spotdiff(
        "video", clip, "--engine", "dask", "--scheduler", address,
        extra_env={"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"},
    )  # fmt: skip
    assert proc.returncode == 1
    assert one_error_line(proc).startswith(f"error: cannot reach the Dask scheduler at {address}")


@pytest.mark.parametrize(
    "args, message",
    [
        (("--scheduler", "tcp://h:8786"), "--scheduler and --workers are for --engine dask"),
        (("--engine", "dask", "--jobs", "2"), "--jobs is for --engine local"),
        (("--engine", "spark"), "--engine must be local or dask"),
        (("--engine", "dask", "--chunk", "250f"), "--chunk is video time, not frames"),
        (("--engine", "dask", "--workers", "3", "--scheduler", "tcp://h:1"), "give one of them"),
    ],
)
def test_engine_options_that_do_not_fit_are_usage_errors(clip, args, message):
    proc = spotdiff("video", clip, *args)
    assert proc.returncode == 2
    assert message in one_error_line(proc)


def test_watch_is_not_distributed(tmp_path):
    proc = spotdiff("video", "--watch", tmp_path, "--engine", "dask", "--watch-idle", "1")
    assert proc.returncode == 2
    assert "leave out --engine dask" in one_error_line(proc)


HIDE = """
import os, sys

class _Hidden:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in ("dask", "distributed"):
            return None
        with open(os.environ["SPOTDIFF_TEST_IMPORT_LOG"], "a") as log:
            log.write(name + "\\n")
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, _Hidden())
"""


@pytest.fixture
def without_dask(tmp_path) -> dict[str, str]:
    """An environment where dask and distributed look uninstalled; attempts are logged."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HIDE)
    (tmp_path / "imports.log").touch()
    return {"PYTHONPATH": str(site), "SPOTDIFF_TEST_IMPORT_LOG": str(tmp_path / "imports.log")}


def test_without_dask_the_engine_names_the_extra_and_the_default_never_imports_it(
    clip, without_dask, tmp_path
):
    proc = spotdiff("video", clip, "--engine", "dask", extra_env=without_dask)
    assert proc.returncode == 1
    assert one_error_line(proc) == (
        "error: --engine dask needs the scale extra: pip install 'spotdiff[scale]'"
    )
    log = Path(without_dask["SPOTDIFF_TEST_IMPORT_LOG"])
    log.write_text("")
    proc = spotdiff("video", clip, "--json", extra_env=without_dask)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["sources"][0]["events"]
    assert log.read_text() == ""  # the local path did not even try


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.slow  # two cluster starts and a resumed run: about 15 s on an idle machine
def test_ctrl_c_leaves_a_resumable_report_and_no_worker_behind(local_run, tmp_path):
    """Ctrl-C in a terminal reaches the whole process group (workers too): exit 130, one line,
    every process of the cluster gone, and the partial report resumes (on Dask again) to the
    local run's timeline."""
    out = tmp_path / "report"
    proc = subprocess.Popen(
        [str(SPOTDIFF), "video", str(media(PERSON)), "--out", str(out), "--engine", "dask",
         "--chunk", "10s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        env=env(), start_new_session=True, preexec_fn=ctrl_c_reaches_child,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (out / "timeline.json").exists() and proc.poll() is None:
        assert time.monotonic() < deadline, "no partial report in 2 minutes"
        time.sleep(0.05)
    family = psutil.Process(proc.pid).children(recursive=True)
    assert proc.poll() is None and family, "the run ended before Ctrl-C"
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    check_clean_exit(done, ("video",))
    assert proc.returncode == 130
    # "interrupted", then where the report is and that --resume continues it (the hint).
    assert one_error_line(done).startswith("error: interrupted")
    _, alive = psutil.wait_procs(family, timeout=10)
    assert not [p for p in alive if _running(p)], [p.cmdline() for p in alive if _running(p)]
    partial = json.loads((out / "timeline.json").read_text())
    assert not partial["complete"] and partial["sources"][0]["checkpoint"]
    # The report's settings say --engine dask: the resumed run's first chunk continues from
    # the checkpoint, the others start as usual.
    resumed = spotdiff("video", media(PERSON), "--out", out, "--resume", timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    local = json.loads((local_run / "timeline.json").read_text())
    expected = [s for s in _sources(local) if s["source"].endswith(PERSON)]
    assert _sources(json.loads((out / "timeline.json").read_text())) == expected
