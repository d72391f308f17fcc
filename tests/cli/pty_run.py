#!/usr/bin/env python3
# pty_run.py [--both] CMD...: runs CMD with stderr (--both: stdout and stderr) on a pseudo-terminal,
# as a user's terminal would be, and writes what the terminal received to stdout (the command's
# own stdout to stderr when it is not on the terminal). Exits with the command's status.
import os
import pty
import subprocess
import sys

args = sys.argv[1:]
both = args[:1] == ["--both"]
if both:
    args = args[1:]
master, slave = pty.openpty()
p = subprocess.Popen(args, stdout=slave if both else subprocess.PIPE, stderr=slave)
os.close(slave)
seen = b""
while True:
    try:
        chunk = os.read(master, 65536)
    except OSError:
        break
    if not chunk:
        break
    seen += chunk
out = p.stdout.read() if p.stdout else b""
p.wait()
sys.stdout.buffer.write(seen)
sys.stderr.buffer.write(out)
sys.exit(p.returncode)
