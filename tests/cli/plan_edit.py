#!/usr/bin/env python3
"""plan_edit.py DB TRACE CHUNK HOW: damages one chunk's plan (event_plans) of a trace, for the store tests.

HOW: flip   one byte in the middle changed (its checksum no longer holds)
     swap   two neighbouring numbers (two bytes each) exchanged, the checksum made again
     short  the last two bytes cut off, the checksum made again
"""
import sqlite3
import sys
import zlib

db_path, trace, chunk, how = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
db = sqlite3.connect(db_path)
(tid,) = db.execute("SELECT id FROM traces WHERE name = ?", (trace,)).fetchone()
(data,) = db.execute("SELECT data FROM event_plans WHERE trace_id = ? AND chunk = ?", (tid, chunk)).fetchone()
b = bytearray(data)
if how == "flip":
    b[len(b) // 2] ^= 0x10
elif how == "swap":
    i = next(k for k in range(0, len(b) - 2, 2) if b[k:k + 2] != b[k + 2:k + 4])
    b[i:i + 2], b[i + 2:i + 4] = b[i + 2:i + 4], b[i:i + 2]
elif how == "short":
    b = b[:-2]
else:
    sys.exit("plan_edit.py: HOW is flip, swap or short")
crc = db.execute("SELECT crc32 FROM event_plans WHERE trace_id = ? AND chunk = ?", (tid, chunk)).fetchone()[0]
if how != "flip":
    crc = zlib.crc32(bytes(b))
db.execute("UPDATE event_plans SET data = ?, crc32 = ? WHERE trace_id = ? AND chunk = ?", (bytes(b), crc, tid, chunk))
db.commit()
