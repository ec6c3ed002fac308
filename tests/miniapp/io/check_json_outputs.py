# check_json_outputs.py MPIEXEC MINIPIPE DECK OUTDIR
# 1. Every JSON output stays valid JSON whatever the strings put into it: a run whose output paths
#    (deck strings, echoed in the report's "dump" and "deck") hold a quote, a backslash, a newline,
#    a tab, control bytes and bytes that are not UTF-8 writes a report, a Chrome trace and a dump;
#    the schedule tool writes its JSON and trace to such names too. Python's json module (not
#    nlohmann) parses each file; the report's "dump" is the path with each invalid byte replaced
#    by U+FFFD, every other character kept.
# 2. The cost-file reader stays strict: a valid file is accepted (the deck's shape is then refused,
#    which needs the parse to succeed), and the same file with text after it, a comment, a NaN, an
#    Infinity or a key twice is refused with exit 2 and a message naming the file and the problem.
import json
import os
import re
import shutil
import subprocess
import sys

mpiexec, binary, deck, out = sys.argv[1:5]
shutil.rmtree(out, ignore_errors=True)
os.makedirs(out)
failures = []

# Everything a file name may hold (no '/', no NUL): quote, backslash, newline, tab, control bytes,
# DEL, a lone continuation byte, a truncated two-byte sequence, 0xff, and valid UTF-8 (e, snowman).
HOSTILE = b'q"b\\s\nn\tt\x01\x1f\x7f\x80x\xc3y\xff\xc3\xa9\xe2\x98\x83'
base = os.fsencode(out)


def path(stem, ext):
    return base + b"/" + stem + HOSTILE + ext


def run(args, expect):
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=240)
    text = r.stdout.decode("utf-8", "replace")
    if r.returncode != expect:
        failures.append("{0} exited {1}, expected {2}:\n{3}".format(args[:4], r.returncode, expect, text[-2000:]))
    return text


def load(p):
    # json.loads on bytes refuses invalid UTF-8, so this also checks the encoding.
    with open(p, "rb") as f:
        data = f.read()
    try:
        return json.loads(data)
    except ValueError as e:
        failures.append("{0!r} is not valid JSON: {1}".format(p, e))
        return None


report, trace, dump = path(b"report", b".json"), path(b"trace", b".json"), path(b"dump", b".h5")
run([mpiexec, "-n", "2", binary, "run", "--deck", deck, "--schedule", "1f1b", "-m", "2", "--dump", dump,
     "--json", report, "--output.trace", trace], 0)
doc = load(report)
if doc is not None:
    want = dump.decode("utf-8", "replace")
    got = doc["runs"][0]["dump"]
    if got != want:
        failures.append("report 'dump' is {0!r}, expected {1!r}".format(got, want))
    if not isinstance(doc["runs"][0]["loss"][0], float) or not isinstance(doc["runs"][0]["p"], int):
        failures.append("report numbers changed type: loss {0!r}, p {1!r}".format(doc["runs"][0]["loss"],
                                                                                doc["runs"][0]["p"]))
    if "dump" not in doc["deck"]:
        failures.append("report 'deck' lacks the output section: {0!r}".format(doc["deck"][-300:]))
tr = load(trace)
if tr is not None and not any(e.get("ph") == "X" for e in tr["traceEvents"]):
    failures.append("the Chrome trace has no complete ('X') event")

sched_json, sched_trace = path(b"schedule", b".json"), path(b"schedule_trace", b".json")
run([binary, "schedule", "-s", "zb-v", "-p", "2", "-m", "4", "--json", sched_json, "--trace", sched_trace,
     "--grid", "none"], 0)
sj = load(sched_json)
if sj is not None and (sj["schedule"] != "zb-v" or len(sj["ranks"]) != 2):
    failures.append("schedule JSON: {0!r}".format(sj))
load(sched_trace)

# 2. Cost files.
costs = os.path.join(out, "costs.json")
run([binary, "profile", "--deck", deck, "--repeat", "1", "--out", costs], 0)
with open(costs) as f:
    good = f.read()
cf = json.loads(good)
if cf["format"] != "minipipe-costs-3" or not isinstance(cf["sizes"][0]["parts"][0]["none"]["F"], float):
    failures.append("cost file: format {0!r}, F {1!r}".format(cf["format"], cf["sizes"][0]["parts"][0]["none"]["F"]))
other_deck = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "inputs", "small.toml")


def tune(text, name):
    p = os.path.join(out, name + ".json")
    with open(p, "w") as f:
        f.write(text)
    return p, run([binary, "tune", "--deck", other_deck, "-p", "2", "--costs", p], 2)


p, msg = tune(good, "good")
if "key 'model.vocab'" not in msg:
    failures.append("the valid cost file was not parsed (no shape refusal): " + msg[-600:])
number = re.search(r'"F": ([0-9.e+-]+)', good)
bad = {
    "trailing": (good + "{}", "at byte [0-9]+: expected end of input"),
    "comment": ("// profiled\n" + good, "at byte [0-9]+: expected"),
    "nan": (good[:number.start(1)] + "NaN" + good[number.end(1):], "at byte [0-9]+: expected"),
    "infinity": (good[:number.start(1)] + "Infinity" + good[number.end(1):], "at byte [0-9]+: expected"),
    "twice": (good.replace('"batch": ', '"batch": 1, "batch": ', 1), "key 'batch' appears twice"),
}
for name, (text, pattern) in bad.items():
    p, msg = tune(text, name)
    if not re.search("cost file " + re.escape(p) + ": .*" + pattern, msg):
        failures.append("cost file '{0}': message does not match {1!r}: {2}".format(name, pattern, msg[-600:]))

for f in failures:
    print("FAIL:", f)
if failures:
    sys.exit(1)
print("PASS: every JSON output parses with hostile strings; bad cost files are refused")
