#!/usr/bin/env python3
"""Two machines (qemu/run-pair): the peer VM's agent, and the client the
suite's VM talks to it with.  Nothing is shared between the two VMs but the
wire (a QEMU socket network), so the suite runs the peer's half of each test
through this agent, over TCP on that wire.

The agent (in the peer VM: peer_agent.py serve PORT) runs shell commands
and answers with their status and output, one JSON object per line:
  {"run": CMD, "timeout": S}    -> {"rc": N, "out": TEXT}
  {"start": CMD, "timeout": S}  -> {"id": N}      in the background
  {"wait": N}                   -> {"rc": N, "out": TEXT}
  {"kill": N}                   -> {"rc": N, "out": TEXT}  (its process group)
  {"quit": true}                -> {} and the agent exits 0
A command that outlives its timeout is killed: rc 124, as timeout(1) says.

The client (in the suite's VM):
  peer_agent.py run HOST:PORT TIMEOUT CMD...    prints the output, exits rc
  peer_agent.py start HOST:PORT TIMEOUT CMD...  prints the id
  peer_agent.py wait|kill HOST:PORT ID          prints the output, exits rc
  peer_agent.py quit HOST:PORT
"""
import json
import os
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

jobs = {}
jobs_lock = threading.Lock()
next_id = [1]
quitting = threading.Event()


class Job:
    def __init__(self, cmd, timeout):
        self.out = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(["/bin/sh", "-c", cmd], stdout=self.out,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        self.deadline = time.monotonic() + timeout
        self.timed_out = False

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def finish(self):
        """Wait for the end (killing it at its deadline); (rc, output)."""
        left = self.deadline - time.monotonic()
        try:
            self.proc.wait(timeout=max(left, 0))
        except subprocess.TimeoutExpired:
            self.timed_out = True
            self.kill()
            self.proc.wait()
        self.out.seek(0)
        text = self.out.read().decode(errors="replace")
        return (124 if self.timed_out else self.proc.returncode), text


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            req = json.loads(line)
            if "run" in req:
                rc, out = Job(req["run"], req.get("timeout", 60)).finish()
                ans = {"rc": rc, "out": out}
            elif "start" in req:
                job = Job(req["start"], req.get("timeout", 60))
                with jobs_lock:
                    n = next_id[0]
                    next_id[0] += 1
                    jobs[n] = job
                ans = {"id": n}
            elif "wait" in req or "kill" in req:
                n = req.get("wait", req.get("kill"))
                with jobs_lock:
                    job = jobs.pop(n, None)
                if job is None:
                    ans = {"rc": 255, "out": "no job %s\n" % n}
                else:
                    if "kill" in req:
                        job.kill()
                    rc, out = job.finish()
                    ans = {"rc": rc, "out": out}
            elif "quit" in req:
                ans = {}
                quitting.set()
            else:
                ans = {"rc": 255, "out": "bad request\n"}
            self.wfile.write((json.dumps(ans) + "\n").encode())
            self.wfile.flush()


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def serve(port):
    srv = Server(("0.0.0.0", port), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    print("peer agent: listening on port %d" % port, flush=True)
    quitting.wait()
    with jobs_lock:
        for job in jobs.values():
            job.kill()
    srv.shutdown()
    return 0


def ask(where, req, wait):
    host, port = where.rsplit(":", 1)
    # The agent may still be booting when the suite starts: retry the
    # connection for a while.
    deadline = time.monotonic() + 120
    while True:
        try:
            s = socket.create_connection((host, int(port)), timeout=10)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    s.settimeout(wait + 30)
    with s:
        s.sendall((json.dumps(req) + "\n").encode())
        line = s.makefile().readline()
    if not line:
        raise ConnectionError("the peer agent closed the connection")
    return json.loads(line)


def main(argv):
    if argv[1] == "serve":
        return serve(int(argv[2]))
    op, where = argv[1], argv[2]
    if op in ("run", "start"):
        timeout = float(argv[3])
        ans = ask(where, {op: " ".join(argv[4:]), "timeout": timeout}, timeout)
        if op == "start":
            print(ans["id"])
            return 0
    elif op in ("wait", "kill"):
        ans = ask(where, {op: int(argv[3])}, 3600)
    elif op == "quit":
        ask(where, {"quit": True}, 10)
        return 0
    else:
        sys.exit("usage: see peer_agent.py")
    sys.stdout.write(ans["out"])
    return ans["rc"]


if __name__ == "__main__":
    sys.exit(main(sys.argv))
