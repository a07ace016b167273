#!/usr/bin/env python3
"""`lmc chat` as users run it: through a pipe (turns, the prompt cache seen
in /stats, /reset, /save and /load across processes, bad files, unknown
commands, usage errors, --help) and through a pseudo-terminal (the prompt,
libedit, Ctrl-C during a reply and at the prompt, Ctrl-D).

The model: $LMC_TEST_CHAT_MODEL when set, else the shipped one (no --model;
$LMC_MODELS_DIR is honoured by lmc). Without either it prints SKIP and
passes. Environment from ctest: LMC_CLI (build/lmc), LMC_SOURCE_DIR,
LMC_BINARY_DIR."""
import fcntl
import json
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("LMC_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
LMC = os.environ.get("LMC_CLI", os.path.join(SOURCE, "build", "lmc"))
MODEL = os.environ.get("LMC_TEST_CHAT_MODEL")
BASE = [LMC, "chat"] + (["--model", MODEL] if MODEL else [])
# short greedy replies: a few turns stay well inside any model's context
SHORT = ["--temp", "0", "--max-tokens", "12"]
TIMEOUT = 60

STATS = re.compile(r"prompt: (\d+) tokens \((\d+) cached, (\d+) computed\)")
failures = []


def check(cond, what, detail=""):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}" + (f"\n  {detail}" if detail else ""), flush=True)
    return cond


def chat(lines, *extra):
    """Runs lmc chat with lines on a pipe; returns (rc, stdout, stderr)."""
    p = subprocess.run(BASE + list(extra), input="".join(l + "\n" for l in lines).encode(),
                       capture_output=True, timeout=TIMEOUT)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def stats_of(err):
    return [tuple(map(int, m.groups())) for m in STATS.finditer(err)]


def error_lines(err):
    return [l for l in err.splitlines() if l.startswith("lmc chat:")]


# ---- through a pipe ------------------------------------------------------------


def test_turns_and_cache(tmp):
    rc, out, err = chat(["In the beginning", "/stats", "And then?", "/stats", "/reset",
                         "And then?", "/stats", "/system Speak as a psalmist.", "And then?",
                         "/stats", "/system", "And then?", "/stats"], *SHORT)
    check(rc == 0, "pipe: three turns exit 0", f"rc {rc}, stderr: {err}")
    check("> " not in out and "\x1b" not in out, "pipe: no prompt and no escape codes on stdout",
          repr(out[:200]))
    check(not error_lines(err), "pipe: no errors", err)
    s = stats_of(err)
    if not check(len(s) == 5, "pipe: /stats prints the last turn's stats", err):
        return
    (p1, c1, f1), (p2, c2, f2), (p3, c3, f3), (p4, c4, f4), (p5, c5, f5) = s
    check(c1 == 0 and f1 == p1, "pipe: the first turn computes its whole prompt", str(s[0]))
    # the first prompt is reused (but for its last token, which a tokenizer
    # may merge with the start of the reply when the turn is re-encoded)
    check(c2 >= p1 - 1 and f2 == p2 - c2 and 0 < f2 < p2,
          "pipe: the second turn reuses the first turn's prompt and computes only new tokens",
          f"first {s[0]}, second {s[1]}")
    check(c3 == 0 and f3 == p3, "pipe: after /reset a turn computes everything again", str(s[2]))
    check(p3 < p2, "pipe: /reset forgets the conversation", f"{s[1]} then {s[2]}")
    check(p4 > p3 and c4 == 0 and f4 == p4,
          "pipe: /system TEXT puts a system message first and resets", f"{s[2]} then {s[3]}")
    check(p5 == p3 and c5 == 0 and f5 == p5, "pipe: /system alone removes it and resets",
          f"{s[2]} then {s[4]}")
    check(re.search(r"last reply: \d+ tokens, ended by ", err), "pipe: /stats says why the reply ended",
          err)
    check(re.search(r"conversation: 2 messages and a system message, \d+ tokens", err) and
          re.search(r"conversation: 2 messages, \d+ tokens in the prompt cache", err),
          "pipe: /stats prints the conversation totals", err)


def test_save_load(tmp):
    saved, after_a, after_b = (os.path.join(tmp, n) for n in ("saved.json", "a.json", "b.json"))
    sysmsg = ["--system", "You are a scribe."]
    rc, out_a, err_a = chat(["Who made the light?", "And the waters?", f"/save {saved}",
                             "What came next?", "/stats", f"/save {after_a}"], *SHORT, *sysmsg)
    check(rc == 0 and not error_lines(err_a), "save: the first process runs", err_a)
    if not check(os.path.exists(saved) and os.path.exists(saved + ".kv"),
                 "save: /save FILE writes FILE and FILE.kv", str(os.listdir(tmp))):
        return
    leftovers = [n for n in os.listdir(tmp) if ".tmp" in n]
    check(not leftovers, "save: no temporary files are left", str(leftovers))
    with open(saved, encoding="utf-8") as f:
        doc = json.load(f)
    check(doc.get("format") == "lmc-chat" and doc.get("version") == 1,
          "save: the file says format lmc-chat, version 1", str(doc)[:300])
    check(doc.get("system") == "You are a scribe.", "save: the system message is saved",
          str(doc.get("system")))
    msgs = doc.get("messages", [])
    check([m.get("role") for m in msgs] == ["user", "assistant"] * 2 and
          msgs[0].get("content") == "Who made the light?",
          "save: the messages are saved in order", str(msgs)[:300])
    with open(after_a, encoding="utf-8") as f:
        reply_a = json.load(f)["messages"][-1]["content"]

    # a fresh process: /load, the same third turn
    rc, out_b, err_b = chat([f"/load {saved}", "What came next?", "/stats", f"/save {after_b}"],
                            *SHORT)
    check(rc == 0 and not error_lines(err_b), "load: the second process runs", err_b)
    check(re.search(r"\[loaded 4 messages from .*, [1-9]\d* tokens in the prompt cache\]", err_b),
          "load: /load reports the messages and the cached tokens", err_b)
    sa, sb = stats_of(err_a), stats_of(err_b)
    if check(len(sa) == 1 and len(sb) == 1, "load: both processes print stats", err_a + err_b):
        (pa, ca, fa), (pb, cb, fb) = sa[0], sb[0]
        check(cb > 0 and fb < pb, "load: after /load a turn computes only its new tokens",
              str(sb[0]))
        check((pa, ca, fa) == (pb, cb, fb),
              "load: the turn after /load reuses exactly what the first process reused",
              f"{sa[0]} vs {sb[0]}")
    check(out_b == reply_a + "\n",
          "load: the reply after /load equals the first process's reply (--temp 0)",
          f"{reply_a!r} vs {out_b!r}")
    with open(after_b, encoding="utf-8") as f:
        doc_b = json.load(f)
    check(doc_b.get("system") == "You are a scribe." and len(doc_b.get("messages", [])) == 6,
          "load: /load restores the system message and the messages", str(doc_b)[:300])


def test_bad_load(tmp):
    notjson, wrong, corrupt = (os.path.join(tmp, n) for n in ("x.json", "w.json", "c.json"))
    with open(notjson, "w") as f:
        f.write("{ this is not json")
    with open(notjson + ".kv", "wb") as f:
        f.write(b"junk")
    with open(wrong, "w") as f:
        json.dump({"format": "something-else", "version": 1, "messages": []}, f)
    with open(corrupt, "w") as f:
        json.dump({"format": "lmc-chat", "version": 1, "system": None,
                   "messages": [{"role": "user", "content": "hi"},
                                {"role": "assistant", "content": "hello"}]}, f)
    with open(corrupt + ".kv", "wb") as f:
        f.write(b"LMCKV\0\0\0 not a prompt cache")
    missing = os.path.join(tmp, "missing.json")
    lines = ["In the beginning", f"/load {missing}", f"/load {notjson}", f"/load {wrong}",
             "/load", "/frobnicate", "And then?", "/stats", f"/load {corrupt}", "Once more",
             "/stats", "/exit", "never sent"]
    rc, out, err = chat(lines, *SHORT)
    check(rc == 0, "bad load: the REPL goes on and exits 0", f"rc {rc}: {err}")
    errs = error_lines(err)
    check(len(errs) == 6, "bad load: one error line per bad /load and unknown command",
          "\n  ".join(errs))
    check(any("missing.json" in e for e in errs) and any("x.json" in e for e in errs) and
          any("lmc-chat" in e for e in errs) and any("c.json.kv" in e for e in errs) and
          any("frobnicate" in e for e in errs), "bad load: the errors name what was wrong",
          "\n  ".join(errs))
    s = stats_of(err)
    if check(len(s) == 2, "bad load: the turns after the bad files run", err):
        check(s[0][1] > 0, "bad load: a failed /load of a bad file keeps the prompt cache",
              str(s[0]))
        check(s[1][0] > s[0][0], "bad load: a failed /load keeps the conversation",
              f"{s[0]} then {s[1]}")
    check(len(re.findall(r"conversation: 6 messages", err)) == 1,
          "bad load: /exit ends the REPL (no turn after it)", err)


def test_usage():
    p = subprocess.run(BASE + ["--frobnicate"], capture_output=True, timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)
    check(p.returncode == 2 and b"unknown option" in p.stderr and not p.stdout,
          "usage: an unknown option exits 2 with the error on stderr",
          f"rc {p.returncode}: {p.stderr!r}")
    p = subprocess.run(BASE + ["--temp", "abc"], capture_output=True, timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)
    check(p.returncode == 2, "usage: a bad value exits 2", f"rc {p.returncode}: {p.stderr!r}")
    p = subprocess.run([LMC, "chat", "--help"], capture_output=True, timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)
    check(p.returncode == 0 and b"usage: lmc chat" in p.stdout and b"/save FILE" in p.stdout and
          not p.stderr, "usage: --help prints on stdout and exits 0",
          f"rc {p.returncode}: {p.stderr!r}")
    p = subprocess.run([LMC, "chat", "--model", "/nonexistent/model"], capture_output=True,
                       timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    check(p.returncode == 1, "usage: a model that does not load exits 1",
          f"rc {p.returncode}: {p.stderr!r}")


# ---- through a pseudo-terminal ---------------------------------------------------


def _controlling_tty():
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Pty:
    """lmc chat on a pseudo-terminal it has as its controlling terminal (so
    Ctrl-C written to the master is a SIGINT, as from a keyboard)."""

    def __init__(self, *extra):
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 200, 0, 0))
        self.p = subprocess.Popen(BASE + list(extra), stdin=slave, stdout=slave, stderr=slave,
                                  preexec_fn=_controlling_tty, close_fds=True)
        os.close(slave)
        self.fd, self.buf, self.pos = master, b"", 0

    def _read(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        r, _, _ = select.select([self.fd], [], [], min(left, 0.5))
        if r:
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                data = b""
            if not data:
                time.sleep(0.05)
                return self.p.poll() is None
            self.buf += data
        return True

    def expect(self, pattern, what, timeout=30):
        """Waits for pattern (bytes regex) after what was matched before."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.buf, self.pos)
            if m:
                self.pos = m.end()
                return m
            if not self._read(deadline):
                check(False, what, f"no {pattern!r} in {self.buf[self.pos:][-600:]!r}")
                return None

    def wait_output(self, nbytes, timeout=30):
        """Waits until nbytes more bytes arrived after the last match."""
        deadline = time.monotonic() + timeout
        while len(self.buf) - self.pos < nbytes:
            if not self._read(deadline):
                return False
        return True

    def send(self, data):
        os.write(self.fd, data)

    def typed(self, data, what, timeout=30):
        """Types data once libedit has the terminal (non-canonical mode): a
        line typed before that would be echoed by the terminal too."""
        deadline = time.monotonic() + timeout
        while termios.tcgetattr(self.fd)[3] & termios.ICANON:
            if time.monotonic() > deadline:
                check(False, what + " (libedit takes the terminal)")
                return
            time.sleep(0.005)
        self.send(data)

    def close(self, timeout=15):
        """Waits for the exit status, reading what lmc still writes (a full
        terminal buffer would block it)."""
        deadline = time.monotonic() + timeout
        try:
            while self.p.poll() is None and self._read(deadline):
                pass
            if self.p.poll() is None:
                check(False, "pty: lmc chat ends", self.buf[-400:].decode("utf-8", "replace"))
                self.p.kill()
                self.p.wait()
                return None
            return self.p.returncode
        finally:
            os.close(self.fd)


PROMPT = rb"> "


def pty_stats(t, what):
    t.typed(b"/stats\r", what)
    m = t.expect(rb"prompt: (\d+) tokens \((\d+) cached, (\d+) computed\)", what)
    t.expect(rb"conversation: (\d+) messages", what)
    t.expect(PROMPT, what + " (prompt back)")
    return tuple(map(int, m.groups())) if m else None


def test_pty(tmp):
    saved = os.path.join(tmp, "pty.json")
    t = Pty(*SHORT)
    try:
        if not t.expect(PROMPT, "pty: the prompt '> ' appears"):
            return
        t.typed(b"In the beginning\r", "pty: first line")
        t.expect(rb"In the beginning", "pty: the typed line is echoed")
        t.expect(rb"\n", "pty: Enter ends the line")
        if not t.expect(PROMPT, "pty: a turn gets a reply and the prompt comes back"):
            return
        first = pty_stats(t, "pty: /stats after the first turn")
        t.typed(f"/save {saved}\r".encode(), "pty: /save")
        t.expect(rb"\[saved 2 messages", "pty: /save")
        t.expect(PROMPT, "pty: the prompt after /save")
        t.typed(b"/reset\r", "pty: /reset")
        t.expect(rb"\[conversation reset\]", "pty: /reset")
        t.expect(PROMPT, "pty: the prompt after /reset")
        t.typed(f"/load {saved}\r".encode(), "pty: /load")
        t.expect(rb"\[loaded 2 messages", "pty: /load")
        t.expect(PROMPT, "pty: the prompt after /load")
        # Ctrl-C at the prompt discards the line being typed
        t.typed(b"this line is discarded", "pty: a line to discard")
        t.expect(rb"discarded", "pty: typing is echoed")
        t.send(b"\x03")
        t.expect(PROMPT, "pty: Ctrl-C at the prompt gives a new prompt")
        t.typed("And then, café ☃?\r".encode(), "pty: second line")
        t.expect("café ☃\\?".encode(), "pty: the second line is echoed")
        t.expect(PROMPT, "pty: the turn after /load gets a reply")
        second = pty_stats(t, "pty: /stats after /load and a turn")
        if first and second:
            check(second[1] >= first[0] - 1 and second[2] < second[0],
                  "pty: the turn after /load computes only its new tokens",
                  f"{first} then {second}")
        t.typed(f"/save {saved}\r".encode(), "pty: /save")
        t.expect(rb"\[saved 4 messages", "pty: the discarded line was not a turn")
        t.expect(PROMPT, "pty: the prompt after the second /save")
        with open(saved, encoding="utf-8") as f:
            msgs = json.load(f)["messages"]
        check(msgs[2]["content"] == "And then, café ☃?", "pty: a line with UTF-8 is read whole",
              repr(msgs[2]["content"]))
        t.typed(b"\x04", "pty: Ctrl-D")
        rc = t.close()
        check(rc == 0, "pty: Ctrl-D exits 0", f"rc {rc}")
    finally:
        if t.p.poll() is None:
            t.p.kill()
            t.p.wait()


def test_pty_interrupt(tmp):
    saved = os.path.join(tmp, "int.json")
    t = Pty("--temp", "1", "--max-tokens", "100000", "--ignore-eos")
    try:
        if not t.expect(PROMPT, "interrupt: the prompt appears"):
            return
        t.typed(b"Tell me everything\r", "interrupt: first line")
        t.expect(rb"everything[^\n]*\n", "interrupt: the line is entered")
        if not check(t.wait_output(8), "interrupt: the reply streams",
                     t.buf[t.pos:].decode("utf-8", "replace")):
            return
        t.send(b"\x03")
        t.expect(rb"\[interrupted\]", "interrupt: Ctrl-C prints [interrupted]")
        t.expect(PROMPT, "interrupt: the prompt comes back after Ctrl-C")
        t.typed(b"/stats\r", "interrupt: /stats")
        t.expect(rb"last reply: \d+ tokens, ended by Ctrl-C", "interrupt: Ctrl-C stopped the reply")
        t.expect(PROMPT, "interrupt: the prompt after /stats")
        t.typed(f"/save {saved}\r".encode(), "interrupt: /save")
        t.expect(rb"\[saved 2 messages", "interrupt: the partial reply is in the conversation")
        t.expect(PROMPT, "interrupt: the prompt after /save")
        with open(saved, encoding="utf-8") as f:
            msgs = json.load(f)["messages"]
        check(len(msgs) == 2 and msgs[1]["role"] == "assistant" and msgs[1]["content"],
              "interrupt: the partial reply is kept", str(msgs)[:300])
        t.typed(b"Go on\r", "interrupt: next line")
        t.expect(rb"Go on[^\n]*\n", "interrupt: the next line is entered")
        t.wait_output(8)
        t.send(b"\x03")
        t.expect(rb"\[interrupted\]", "interrupt: the next turn streams a reply")
        t.expect(PROMPT, "interrupt: the prompt comes back again")
        s = pty_stats(t, "interrupt: /stats after the next turn")
        if s:
            check(s[1] > 0, "interrupt: the next turn reuses the interrupted conversation", str(s))
        check(b"lmc chat:" not in t.buf, "interrupt: no errors",
              t.buf.decode("utf-8", "replace")[-600:])
        t.typed(b"/quit\r", "interrupt: /quit")
        rc = t.close()
        check(rc == 0, "interrupt: /quit exits 0", f"rc {rc}")
    finally:
        if t.p.poll() is None:
            t.p.kill()
            t.p.wait()


TGKILL = {"x86_64": 234, "aarch64": 131}.get(os.uname().machine)


def tgkill(pid, tid, sig):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(TGKILL, pid, tid, sig) == 0


def other_threads_taking(pid, sig):
    """The threads of pid but its main one that do not block sig."""
    out = []
    for t in os.listdir(f"/proc/{pid}/task"):
        if int(t) == pid:
            continue
        with open(f"/proc/{pid}/task/{t}/status") as f:
            blk = [int(ln.split()[1], 16) for ln in f if ln.startswith("SigBlk:")][0]
        if not blk & (1 << (sig - 1)):
            out.append(int(t))
    return out


def test_pipe_sigint(tmp, to_other_thread=False):
    """In pipe mode a Ctrl-C (SIGINT) while waiting for input exits 130;
    also when the kernel hands it to a thread other than the reading one
    (an OpenBLAS worker, which does not block signals)."""
    what = "pipe SIGINT to another thread" if to_other_thread else "pipe SIGINT"
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2")
    p = subprocess.Popen(BASE + SHORT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    try:
        p.stdin.write(b"/stats\n")
        p.stdin.flush()
        deadline = time.monotonic() + TIMEOUT
        err = b""
        while b"conversation:" not in err and time.monotonic() < deadline:
            r, _, _ = select.select([p.stderr], [], [], 0.5)
            if r:
                chunk = os.read(p.stderr.fileno(), 4096)
                if not chunk:
                    break
                err += chunk
        check(b"conversation:" in err, what + ": the REPL answers first", repr(err))
        if to_other_thread:
            others = other_threads_taking(p.pid, signal.SIGINT)
            if not TGKILL or not others:
                print(f"SKIP: {what}: no other thread or no tgkill here")
                return
            check(tgkill(p.pid, others[0], signal.SIGINT), what + ": tgkill")
        else:
            p.send_signal(signal.SIGINT)
        try:
            rc = p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            rc = "none after 15 s"
        check(rc == 130, what + ": exits 130", f"rc {rc}")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def main():
    if not os.access(LMC, os.X_OK):
        print(f"FAIL: no lmc at {LMC}")
        return 1
    # is there a model? (the shipped one may not be there)
    p = subprocess.run(BASE, stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT)
    if p.returncode != 0:
        msg = p.stderr.decode("utf-8", "replace").strip()
        if not MODEL and "shipped model" in msg:
            print(f"SKIP: no model for lmc chat ({msg})")
            return 0
        print(f"FAIL: lmc chat does not start: rc {p.returncode}: {msg}")
        return 1
    start = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="lmc-chat-test-")
    try:
        for name, fn in [("turns and the prompt cache", test_turns_and_cache),
                         ("/save and /load", test_save_load), ("bad /load", test_bad_load),
                         ("usage", lambda tmp: test_usage()), ("pty", test_pty),
                         ("pty Ctrl-C", test_pty_interrupt), ("pipe SIGINT", test_pipe_sigint),
                         ("pipe SIGINT to another thread",
                          lambda tmp: test_pipe_sigint(tmp, to_other_thread=True))]:
            t0 = time.monotonic()
            try:
                fn(tmp)
            except subprocess.TimeoutExpired as e:
                check(False, f"{name}: timed out", str(e))
            print(f"{name}: {time.monotonic() - t0:.1f} s", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"total {time.monotonic() - start:.1f} s")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("ok: lmc chat")
    return 0


if __name__ == "__main__":
    sys.exit(main())
