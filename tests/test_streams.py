"""Live streams: ``spotdiff video rtsp://... | http://...`` read through the bundled ffmpeg.

Every stream here is served on loopback from a clip by the bundled ffmpeg itself:

- HTTP: ``ffmpeg -readrate R -i clip -c copy -f mpegts -listen 1 http://127.0.0.1:PORT/``.
- RTSP: ffmpeg's RTSP *muxer* only pushes to a server (ANNOUNCE/RECORD) and ``-rtsp_flags
  listen`` exists only for its demuxer (a server receiving a push), so no ffmpeg command serves
  a reader's DESCRIBE/PLAY (checked with ffmpeg 9.0: ``-f rtsp -rtsp_flags listen`` tries to
  connect out and fails). :class:`RtspServer` is therefore a minimal RTSP server in the test:
  ffmpeg's ``-f rtp`` muxer writes the SDP and every RTP/RTCP packet from the clip; the test
  only answers OPTIONS/DESCRIBE/SETUP/PLAY and relays the packets over the RTSP connection
  (RTP over TCP, RFC 2326 §10.12), then closes it when the clip ends.

A clip drawn here (a red box, later a blue one, h264) makes the suite independent of
../shared; the real Intel clip is used when ../shared/media has it.
"""

from __future__ import annotations

import json
import re
import selectors
import signal
import socket
import subprocess
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from conftest import draw_box, media, textured_background
from console import check_clean_exit, one_error_line, run_spotdiff, start_spotdiff

from spotdiff_cli.frames.stream import StreamSource, is_stream, redact
from spotdiff_cli.frames.video import find_ffmpeg

FFMPEG = find_ffmpeg()
pytestmark = pytest.mark.skipif(FFMPEG is None, reason="needs an ffmpeg binary (imageio-ffmpeg)")

FPS = 5
SECONDS = 12
RED, BLUE = (220, 40, 40), (40, 60, 220)


def scene(i: int) -> np.ndarray:
    """Frame ``i`` (at i/FPS s): a red box from 3 s to 6 s, a blue one from 8 s to 10 s."""
    image = textured_background(120, 160)
    t = i / FPS
    if 3 <= t < 6:
        image = draw_box(image, 100, 70, 30, 25, RED)
    if 8 <= t < 10:
        image = draw_box(image, 15, 10, 30, 25, BLUE)
    return image


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    """The scene as a 12 s h264 mp4, a keyframe every second (a camera's usual GOP)."""
    path = tmp_path_factory.mktemp("clip") / "boxes.mp4"
    frames = b"".join(scene(i).tobytes() for i in range(FPS * SECONDS))
    subprocess.run(
        [FFMPEG, "-hide_banner", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24",
         "-s", "160x120", "-r", str(FPS), "-i", "-", "-c:v", "libx264", "-g", str(FPS),
         "-pix_fmt", "yuv420p", str(path)],
        input=frames, check=True, timeout=120,
    )  # fmt: skip
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    """Whether something listens on 127.0.0.1:port, without connecting (``-listen 1`` serves
    the first client only, so a probe connection would be that client)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            local, state = row.split()[1], row.split()[3]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                return True
    return False


def serve_http(source: Path, port: int, readrate: float = 8.0, *extra: str) -> subprocess.Popen:
    """The clip as a live MPEG-TS stream on http://127.0.0.1:port/ for one client, paced at
    ``readrate`` times real time; returns once the server listens."""
    server = subprocess.Popen(
        [FFMPEG, "-hide_banner", "-loglevel", "error", "-readrate", str(readrate), *extra,
         "-i", str(source), "-an", "-c", "copy", "-f", "mpegts", "-listen", "1",
         f"http://127.0.0.1:{port}/"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not listening(port):
        assert server.poll() is None and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    return server


def stop(*procs: subprocess.Popen | None) -> None:
    for proc in procs:
        if proc is not None and proc.poll() is None:
            proc.kill()
        if proc is not None:
            proc.wait(timeout=10)


def file_events(clip: Path, *args: object) -> list[dict]:
    proc = run_spotdiff("video", clip, "--every", "1s", "--no-recognise", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["sources"][0]["events"]


def summary(events: list[dict]) -> list[tuple]:
    return [(e["id"], e["start"], e["end"], e["kind"], e["text"]) for e in events]


def report(out: Path) -> dict:
    return json.loads((out / "timeline.json").read_text())


def streamed(path: Path) -> list[dict]:
    return [json.loads(line)["event"] for line in path.read_text().splitlines()]


# -- HTTP ---------------------------------------------------------------------------------------


# ~13 s; the HTTP stream's events are also checked by the real clip over HTTP below.
@pytest.mark.slow
def test_http_stream_finds_what_the_file_run_finds_and_resume_adds_a_session(clip, tmp_path):
    port = free_port()
    out, events = tmp_path / "r", tmp_path / "events.jsonl"
    common = (
        "video", f"http://127.0.0.1:{port}/", "--every", "1s", "--no-recognise",
        "--out", out, "--jsonl", events,
    )  # fmt: skip
    server = serve_http(clip, port)
    try:
        proc = run_spotdiff(*common)
    finally:
        stop(server)
    assert proc.returncode == 0, proc.stderr  # the server closing the stream is its end
    data = report(out)
    source = data["sources"][0]
    assert data["complete"] and source["complete"] and not source["warnings"], source
    assert source["source"] == f"http://127.0.0.1:{port}/"
    assert source["info"]["kind"] == "stream" and source["info"]["duration"] is None
    started = datetime.fromisoformat(source["info"]["started_at"])
    assert started.tzinfo is not None and abs(datetime.now(timezone.utc) - started).seconds < 600
    assert source["samples"] == SECONDS  # one per second of stream time, as for the file
    # The same frames at the same stream times (ffmpeg shrinks and times them as for a file):
    # the same events.
    expected = file_events(clip)
    assert len(expected) >= 2
    assert summary(source["events"]) == summary(expected)
    assert [e["id"] for e in streamed(events)] == [e["id"] for e in source["events"]]
    # Each event's moment on the clock, in the report and in the stream a consumer tails.
    for event in source["events"]:
        assert datetime.fromisoformat(event["wall_start"]) == started + timedelta(
            seconds=event["start"]
        )
    assert [e["wall_start"] for e in streamed(events)] == [
        e["wall_start"] for e in source["events"]
    ]
    assert "UTC)" in (out / "timeline.md").read_text()

    # --resume: the camera again, later: a new session appended on the same time axis.
    server = serve_http(clip, port)
    try:
        second = run_spotdiff(*common, "--resume")
    finally:
        stop(server)
    assert second.returncode == 0, second.stderr
    before, after = source, report(out)["sources"][0]
    n = len(before["events"])
    assert after["complete"] and after["info"]["started_at"] == before["info"]["started_at"]
    assert summary(after["events"][:n]) == summary(before["events"])  # kept, not redone
    new = after["events"][n:]
    # The same footage again: the same changes, numbered on, later on the same time axis.
    assert [e["id"] for e in new] == list(range(n + 1, 2 * n + 1))
    assert [(e["kind"], e["text"]) for e in new] == [
        (e["kind"], e["text"]) for e in before["events"]
    ]
    assert all(e["start"] > before["processed_until"] for e in new)
    assert abs(after["samples"] - 2 * before["samples"]) <= 1  # the new grid's phase varies
    assert [e["id"] for e in streamed(events)] == list(range(1, 2 * n + 1))  # appended


def test_a_real_clip_streamed_over_http_gives_the_file_run_events(tmp_path):
    """The Intel car clip (768x432, 12.5 fps, h264), its first 11 s served at 8x real time."""
    real = media("intel_car-detection.mp4")
    port = free_port()
    out = tmp_path / "r"
    server = serve_http(real, port, 8.0, "-t", "11")
    try:
        proc = run_spotdiff(
            "video", f"http://127.0.0.1:{port}/", "--every", "1s", "--no-recognise", "--out", out
        )
    finally:
        stop(server)
    assert proc.returncode == 0, proc.stderr
    got = report(out)["sources"][0]["events"]
    # The stream ends at 11 s: a change still going on there is cut short, so compare the
    # events that start a step before it.
    step, cut = 1.0, 10.0
    expected = [e for e in file_events(real, "--end", "11s") if e["start"] < cut - step]
    got = [g for g in got if g["start"] < cut - step]
    # The car and the light around it (no phantom camera moves since the camera-move check).
    assert len(expected) >= 2
    # Within a sampling step, the same kinds of change, both ways.
    for e in expected:
        assert any(g["kind"] == e["kind"] and abs(g["start"] - e["start"]) <= step for g in got), e
    for g in got:
        assert any(
            e["kind"] == g["kind"] and abs(g["start"] - e["start"]) <= step for e in expected
        ), g


# -- RTSP ---------------------------------------------------------------------------------------


class RtspServer:
    """A minimal RTSP server for one client on 127.0.0.1: the SDP and the RTP/RTCP packets come
    from ffmpeg's own ``-f rtp`` muxer (started on PLAY, paced at ``readrate``); this answers
    the requests and relays the packets interleaved on the RTSP connection (RTP over TCP),
    then closes the connection when the clip ends (the stream's end)."""

    def __init__(self, source: Path, readrate: float = 8.0) -> None:
        self.source, self.readrate = source, readrate
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.url = f"rtsp://127.0.0.1:{self.listener.getsockname()[1]}/live"
        sdp = subprocess.run(
            [FFMPEG, "-hide_banner", "-loglevel", "error", "-i", str(source), "-an",
             "-c:v", "copy", "-frames:v", "1", "-f", "rtp", "rtp://127.0.0.1:9"],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout  # fmt: skip
        self.sdp = sdp[sdp.index("v=0") :].replace("\n", "\r\n")
        self.pusher: subprocess.Popen | None = None
        self.requests: list[str] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _reply(self, conn: socket.socket, cseq: str, headers: str = "", sdp: str = "") -> None:
        head = f"RTSP/1.0 200 OK\r\nCSeq: {cseq}\r\n{headers}"
        if sdp:
            head += f"Content-Type: application/sdp\r\nContent-Length: {len(sdp)}\r\n"
        with self._lock:
            conn.sendall((head + "\r\n" + sdp).encode())

    def _serve(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        self.listener.close()
        buf = b""
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while buf:
                    if buf[:1] == b"$":  # the client's RTCP receiver reports: skip them
                        size = 4 + int.from_bytes(buf[2:4], "big") if len(buf) >= 4 else None
                        if size is None or len(buf) < size:
                            break
                        buf = buf[size:]
                        continue
                    end = buf.find(b"\r\n\r\n")
                    if end < 0:
                        break
                    request, buf = buf[:end].decode(), buf[end + 4 :]
                    method = request.split(" ", 1)[0]
                    self.requests.append(method)
                    cseq = re.search(r"CSeq:\s*(\d+)", request)[1]
                    if method == "DESCRIBE":
                        self._reply(conn, cseq, f"Content-Base: {self.url}/\r\n", self.sdp)
                    elif method == "SETUP":
                        transport = "RTP/AVP/TCP;unicast;interleaved=0-1"
                        self._reply(conn, cseq, f"Session: 1\r\nTransport: {transport}\r\n")
                    elif method == "PLAY":
                        self._reply(conn, cseq, "Session: 1\r\n")
                        threading.Thread(target=self._push, args=(conn,), daemon=True).start()
                    elif method == "TEARDOWN":
                        self._reply(conn, cseq, "Session: 1\r\n")
                        return
                    else:  # OPTIONS, GET_PARAMETER keep-alives
                        self._reply(conn, cseq, "Public: OPTIONS, DESCRIBE, SETUP, PLAY\r\n")

    def _push(self, conn: socket.socket) -> None:
        rtp, rtcp = (socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2))
        selector = selectors.DefaultSelector()
        for channel, sock in enumerate((rtp, rtcp)):
            sock.bind(("127.0.0.1", 0))
            selector.register(sock, selectors.EVENT_READ, channel)
        port, rtcp_port = rtp.getsockname()[1], rtcp.getsockname()[1]
        self.pusher = subprocess.Popen(
            [FFMPEG, "-hide_banner", "-loglevel", "error", "-readrate", str(self.readrate),
             "-i", str(self.source), "-an", "-c:v", "copy", "-f", "rtp",
             f"rtp://127.0.0.1:{port}?rtcpport={rtcp_port}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            while True:
                ready = selector.select(0.2)
                if not ready and self.pusher.poll() is not None:
                    break  # the clip has been sent
                for key, _ in ready:
                    packet = key.fileobj.recv(65536)
                    header = b"$" + bytes([key.data]) + len(packet).to_bytes(2, "big")
                    with self._lock:
                        conn.sendall(header + packet)
        except OSError:
            pass  # the client went away
        finally:
            try:
                conn.shutdown(socket.SHUT_RDWR)  # the end of the stream
            except OSError:
                pass
            rtp.close()
            rtcp.close()

    def close(self) -> None:
        stop(self.pusher)
        self.listener.close()
        self._thread.join(timeout=10)


def test_rtsp_stream_finds_what_the_file_run_finds(clip, tmp_path):
    server = RtspServer(clip)
    out = tmp_path / "r"
    try:
        proc = run_spotdiff(
            "video", server.url, "--every", "1s", "--no-recognise", "--out", out,
            "--jsonl", "-",
        )  # fmt: skip
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr
    assert {"DESCRIBE", "SETUP", "PLAY"} <= set(server.requests)
    source = report(out)["sources"][0]
    assert source["complete"] and not source["warnings"], source
    assert source["samples"] == SECONDS
    expected = file_events(clip)
    assert summary(source["events"]) == summary(expected)
    lines = [json.loads(line) for line in proc.stdout.splitlines()]  # stdout: the stream only
    assert [p["event"]["id"] for p in lines] == [e["id"] for e in expected]
    assert all(p["source"] == server.url for p in lines)


# -- failures -----------------------------------------------------------------------------------


def test_an_unreachable_stream_is_one_error_line_and_exit_1(tmp_path):
    refused = run_spotdiff("video", f"http://127.0.0.1:{free_port()}/cam", timeout=60)
    assert refused.returncode == 1
    assert "cannot open the stream" in one_error_line(refused)
    assert "Connection refused" in refused.stderr

    # A server that accepts the connection and then says nothing (a hung camera): ffmpeg's
    # socket timeout (--stream-timeout) ends the attempt; the run limit below guards a hang.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        port = silent.getsockname()[1]
        for url in (f"http://127.0.0.1:{port}/", f"rtsp://127.0.0.1:{port}/live"):
            hung = run_spotdiff("video", url, "--stream-timeout", "1", timeout=60)
            assert hung.returncode == 1, hung.stderr
            assert "cannot open the stream" in one_error_line(hung)


def test_a_password_in_the_url_never_reaches_the_report_or_messages(tmp_path):
    url = f"rtsp://admin:s3cret@127.0.0.1:{free_port()}/live"
    assert redact(url, url) == url.replace("s3cret", "***")
    proc = run_spotdiff("video", url, "--out", tmp_path / "r", timeout=60)
    assert proc.returncode == 1
    assert "s3cret" not in proc.stderr + proc.stdout and "admin:***@" in proc.stderr
    # Nothing was read, so no report is written (the corrected rerun needs no --overwrite);
    # whatever is there holds no password.
    written = "".join(p.read_text() for p in (tmp_path / "r").glob("*") if p.is_file())
    assert "s3cret" not in written and not (tmp_path / "r" / "timeline.json").exists()


def test_stream_specs_are_recognised_and_a_stream_runs_alone(tmp_path, clip):
    assert is_stream("rtsp://cam/1") and is_stream("HTTPS://cam/x?a=1") and is_stream("webcam:0")
    assert is_stream("/dev/video2") and not is_stream(str(clip)) and not is_stream("cam/*.jpg")
    mixed = run_spotdiff("video", "rtsp://127.0.0.1:9/x", clip)
    assert mixed.returncode == 2 and "one spotdiff per camera" in one_error_line(mixed)
    if not Path("/dev/video7").exists():
        missing = run_spotdiff("video", "webcam:7")
        assert "no webcam at /dev/video7" in one_error_line(missing)


class StallingRelay:
    """A TCP relay in front of HTTP servers: connection k is forwarded to ``upstreams[k]``
    until ``stall_after`` bytes went through, then goes silent without closing (a cable
    pulled out); once every upstream is used, the port refuses connections (the camera is
    gone)."""

    def __init__(self, upstreams: list[int], stall_after: int) -> None:
        self.upstreams, self.stall_after = upstreams, stall_after
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.port = self.listener.getsockname()[1]
        self.held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        for upstream in self.upstreams:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", upstream))
            self.held += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, None), daemon=True).start()
            threading.Thread(
                target=self._pipe, args=(server, client, self.stall_after), daemon=True
            ).start()
        self.listener.close()  # no more servers: refused from now on

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, limit: int | None) -> None:
        sent = 0
        try:
            while limit is None or sent < limit:
                data = src.recv(4096 if limit is None else min(4096, limit - sent))
                if not data:
                    return
                dst.sendall(data)
                sent += len(data)
        except OSError:
            return

    def close(self) -> None:
        self.listener.close()
        for sock in self.held:
            sock.close()


# Slow: it waits out two socket timeouts and the backoff between reconnects (~14 s).
@pytest.mark.slow
def test_a_dropped_connection_reconnects_then_gives_up_with_a_warning(clip, tmp_path):
    total = len(
        subprocess.run(
            [FFMPEG, "-hide_banner", "-loglevel", "error", "-i", str(clip), "-an", "-c", "copy",
             "-f", "mpegts", "-"],
            capture_output=True, check=True, timeout=60,
        ).stdout
    )  # fmt: skip
    ports = [free_port(), free_port()]
    servers = [serve_http(clip, port) for port in ports]
    # Each connection carries two thirds of the clip, then stalls.
    relay = StallingRelay(ports, stall_after=total * 2 // 3)
    out = tmp_path / "r"
    try:
        proc = run_spotdiff(
            "video", f"http://127.0.0.1:{relay.port}/", "--every", "1s", "--no-recognise",
            "--out", out, "--stream-timeout", "1", "--reconnect", "1", timeout=120,
        )  # fmt: skip
    finally:
        relay.close()
        stop(*servers)
    assert proc.returncode == 0, proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 2, proc.stderr
    assert "connection lost at" in warnings[0] and warnings[0].endswith("reconnected")
    assert "gave up after 1 reconnect" in warnings[1]
    source = report(out)["sources"][0]
    assert source["complete"] and source["warnings"] == [w[len("warning: ") :] for w in warnings]
    # The second connection's samples come after the first's on the wall-clock axis, the
    # outage in between; the clip's first change was seen on each connection.
    lost = [seconds(re.search(r"lost at (\S+)", w)[1]) for w in warnings]
    assert lost[0] < lost[1] <= source["processed_until"] + 1.0
    first_change = file_events(clip)[0]
    again = [e for e in source["events"] if e["text"] == first_change["text"]]
    assert len(again) == 2 and again[1]["start"] > lost[0], source["events"]


def seconds(timecode: str) -> float:
    h, m, s = timecode.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def running_readers(port: int) -> list[int]:
    """Pids of ffmpeg processes reading from 127.0.0.1:port (not the server, which listens)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        text = [a.decode(errors="replace") for a in args]
        if any(f"127.0.0.1:{port}" in a for a in text) and "-listen" not in text:
            if any("ffmpeg" in a for a in text[:1]):
                pids.append(int(entry.name))
    return pids


def test_ctrl_c_ends_a_stream_with_exit_130_a_valid_timeline_and_no_ffmpeg_left(clip, tmp_path):
    port = free_port()
    # Looped at twice real time: the stream is still going whenever Ctrl-C comes.
    server = serve_http(clip, port, 2.0, "-stream_loop", "-1")
    out = tmp_path / "r"
    args = ("video", f"http://127.0.0.1:{port}/", "--every", "1s", "--no-recognise")
    proc = start_spotdiff(*args, "--out", out)
    try:
        deadline = time.monotonic() + 60
        samples = 0
        while samples < 2 and time.monotonic() < deadline:
            try:
                samples = report(out)["sources"][0]["samples"]
            except (OSError, ValueError, IndexError, KeyError):
                pass
            time.sleep(0.1)
        assert samples >= 2
        assert running_readers(port), "spotdiff's ffmpeg should be reading now"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        stop(proc, server)
    done = subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)
    check_clean_exit(done, args)
    assert proc.returncode == 130, stderr
    source = report(out)["sources"][0]
    assert not source["complete"] and source["samples"] >= 2
    assert not running_readers(port)  # the ffmpeg child went with it

    # Resumed later: a new session after what was seen; every event closed before Ctrl-C stays.
    server = serve_http(clip, port)
    try:
        resumed = run_spotdiff(*args, "--out", out, "--resume")
    finally:
        stop(server)
    assert resumed.returncode == 0, resumed.stderr
    after = report(out)["sources"][0]
    n = len(source["events"])
    assert after["complete"] and summary(after["events"][:n]) == summary(source["events"])
    assert [e["id"] for e in after["events"]] == list(range(1, len(after["events"]) + 1))
    assert all(e["start"] > source["processed_until"] for e in after["events"][n:])
    # One sample per second of the new session (its grid's phase depends on when it opened).
    assert SECONDS - 1 <= after["samples"] - source["samples"] <= SECONDS + 1


def test_a_stream_source_can_be_read_from_python(clip):
    port = free_port()
    server = serve_http(clip, port)
    try:
        with StreamSource(f"http://127.0.0.1:{port}/", timeout=5) as source:
            assert (source.info.width, source.info.height) == (160, 120)
            frames = list(source.sample("2s", max_side=80))
    finally:
        stop(server)
    assert [f.timestamp for f in frames] == pytest.approx([0, 2, 4, 6, 8, 10])
    assert all(f.pixels.shape == (60, 80, 3) for f in frames)


@pytest.mark.slow  # real time: the point is how times follow the clock (~8 s)
def test_an_mjpeg_camera_is_timed_by_arrival(clip):
    """MJPEG over HTTP (multipart/x-mixed-replace, the cheap IP camera's feed) has no frame
    times: ffmpeg numbers frames at a guessed 25 fps, which would make this 5 fps clip run 5x
    slow. Its frames are timed by when they arrive instead."""
    port = free_port()
    server = subprocess.Popen(
        [FFMPEG, "-hide_banner", "-loglevel", "error", "-re", "-t", "6", "-i", str(clip),
         "-an", "-c:v", "mjpeg", "-q:v", "5", "-f", "mpjpeg", "-listen", "1",
         f"http://127.0.0.1:{port}/"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        while not listening(port):
            assert server.poll() is None
            time.sleep(0.05)
        with StreamSource(f"http://127.0.0.1:{port}/", timeout=5) as source:
            frames = list(source.sample("1s"))
    finally:
        stop(server)
    # 6 s of camera: about 6 one-second samples (25 fps numbering would give 30 frames
    # timed 0-1.2 s, so two samples).
    assert 4 <= len(frames) <= 8, [f.timestamp for f in frames]
