#!/usr/bin/env python3
"""Mutation check: builds copies of the tree with known bugs (mutations.py) and shows that the test
suites catch each of them.

    bash tests/mutation/run.sh [--jobs N] [--only id,id] [--table FILE] [--timeout S] [--keep]
                               [--deadline S] [WORKDIR]

For the unmodified tree (WORKDIR/baseline) and each mutation (WORKDIR/<id>): copy the source tree
(git's tracked and untracked-but-not-ignored files, or, without git, everything but .git and
build*/), apply the mutation (an exact string replacement whose `old` must occur exactly once),
configure, build the mutation's test targets, run each target's test binary with the mutation's
gtest filter. All copies build at once (--jobs builds of --build-jobs compile jobs each), and each
copy's tests start as soon as it is built (--test-jobs binaries at a time; they share the GPU).

A mutant is CAUGHT when at least one of its tests fails (or the binary dies, reported as such; a
timeout after a failure still counts, shown as "N… failed"); its run ends at the first failed
assertion, and the test that was running is the one listed. SURVIVED when all of them pass, and
NOT APPLIED / BUILD FAILED / TIMEOUT / NOT RUN / ERROR otherwise. The baseline runs every test that
a selected mutation's filters select (one process per test) and must pass them all. The exit status
is 0 only if the baseline passes and every selected mutation is caught.

--deadline S stops everything S seconds in (what finished is reported). Re-running with the same
WORKDIR after --keep resumes: unchanged files are not rewritten (so ninja rebuilds nothing), and the
results of a variant whose tree, mutation, filters, GPU and this script are unchanged are taken from
WORKDIR/results (marked "cached"); --fresh ignores them. Logs: WORKDIR/logs.

--check applies every mutation in scratch copies (no configure, build or run) and checks the
filters against the tests the targets' sources declare: the cheap first thing to run.
"""

import argparse
import concurrent.futures
import fnmatch
import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # loading mutations.py leaves no __pycache__ in the tree

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SOURCE = os.path.dirname(os.path.dirname(HERE))
BASELINE = "baseline"
CUDA_BIN = "/usr/local/cuda/bin"
CMAKE_OPTIONS = [
    "-G", "Ninja",
    "-DCMAKE_BUILD_TYPE=Release",
    "-DHIPGRAD_BACKEND=CUDA",
    "-DCMAKE_CUDA_ARCHITECTURES=90a",
    "-DHIPGRAD_BUILD_EXAMPLES=OFF",
    "-DHIPGRAD_BUILD_BENCH=OFF",
]
REQUIRED_FIELDS = ("id", "bug", "file", "old", "new", "targets", "filter")
SHOWN_FAILURES = 3

# Statuses, in the table's words.
CAUGHT, SURVIVED, PASS, FAIL = "CAUGHT", "SURVIVED", "PASS", "FAIL"
NOT_APPLIED, BUILD_FAILED, TIMEOUT, NOT_RUN, ERROR = "NOT APPLIED", "BUILD FAILED", "TIMEOUT", "NOT RUN", "ERROR"

print_lock = threading.Lock()


class Stopper:
    """The --deadline: past it no work starts, and every process still running is killed."""

    def __init__(self):
        self.lock = threading.Lock()
        self.processes = set()
        self.stopped = threading.Event()
        self.deadline = None  # time.monotonic() value, or None

    def remaining(self):
        return None if self.deadline is None else self.deadline - time.monotonic()

    def register(self, proc):
        with self.lock:
            self.processes.add(proc)
            if self.stopped.is_set():
                kill_group(proc, signal.SIGTERM)

    def unregister(self, proc):
        with self.lock:
            self.processes.discard(proc)

    def stop(self):
        """SIGTERM first, so that ninja takes down the compiles it started in process groups of
        their own; SIGKILL for whatever still runs a few seconds later."""
        with self.lock:
            self.stopped.set()
            procs = list(self.processes)
        for proc in procs:
            kill_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            time.sleep(0.1)
        for proc in procs:
            kill_group(proc)

    def watch(self, seconds):
        self.deadline = time.monotonic() + seconds
        timer = threading.Timer(seconds, self.stop)
        timer.daemon = True
        timer.start()


def kill_group(proc, signum=signal.SIGKILL):
    try:
        os.killpg(proc.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


stopper = Stopper()


def log(message):
    with print_lock:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ---- the mutation list ---------------------------------------------------------------------------


def load_mutations(path):
    spec = importlib.util.spec_from_file_location("hipgrad_mutations", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.MUTATIONS)


def validate_entry(m):
    """Problems with an entry's fields (not with its snippet: that is apply's)."""
    problems = []
    for field in REQUIRED_FIELDS:
        if field not in m:
            problems.append(f"missing field '{field}'")
    if problems:
        return problems
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", m["id"]) or m["id"] == BASELINE:
        problems.append(f"bad id '{m['id']}'")
    if not m["file"].startswith("include/"):
        problems.append(f"file '{m['file']}' is not under include/")
    if m["old"] == m["new"]:
        problems.append("old and new are the same")
    if not m["targets"]:
        problems.append("no targets")
    for t in m["targets"]:
        if not m["filter"].get(t):
            problems.append(f"no filter for target {t}")
    for t in m["filter"]:
        if t not in m["targets"]:
            problems.append(f"filter for {t}, which is not among the targets")
    return problems


# ---- the source tree -----------------------------------------------------------------------------


def source_files(source, workdir):
    """Relative paths of the tree's files: git's tracked and untracked-but-not-ignored files in a
    git checkout, else (a plain copy of the tree) everything but .git, build*/, the WORKDIR and
    what the top-level .gitignore's plain patterns name."""
    try:
        top = subprocess.run(["git", "-C", source, "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                             check=True).stdout.strip()
        if os.path.realpath(top) == os.path.realpath(source):
            out = subprocess.run(["git", "-C", source, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                 capture_output=True, check=True).stdout
            files = sorted({p for p in out.decode().split("\0") if p and "__pycache__" not in p.split("/")})
            return [p for p in files if os.path.isfile(os.path.join(source, p)) and not in_dir(os.path.join(source, p), workdir)]
    except (subprocess.CalledProcessError, FileNotFoundError):
        pass
    ignored = top_level_ignores(source)
    files = []
    for root, dirs, names in os.walk(source):
        rel_root = os.path.relpath(root, source)
        top = rel_root == "."
        keep = []
        for d in dirs:
            if (d in (".git", "__pycache__") or (top and (d.startswith("build") or ignored_name(d, ignored)))
                    or in_dir(os.path.join(root, d), workdir)):
                continue
            keep.append(d)
        dirs[:] = sorted(keep)
        for n in sorted(names):
            if n.endswith(".pyc") or (top and ignored_name(n, ignored)) or not os.path.isfile(os.path.join(root, n)):
                continue
            files.append(os.path.normpath(os.path.join(rel_root, n)))
    return files


def top_level_ignores(source):
    """Patterns of the top-level .gitignore that name top-level entries ("build/", "/.gl/", "*.log")."""
    patterns = []
    try:
        with open(os.path.join(source, ".gitignore")) as f:
            for line in f:
                line = line.strip()
                if not line or line.startswith("#") or line.startswith("!"):
                    continue
                line = line.strip("/")
                if line and "/" not in line:
                    patterns.append(line)
    except OSError:
        pass
    return patterns


def ignored_name(name, patterns):
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def in_dir(path, directory):
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return path == directory or path.startswith(directory + os.sep)


def read_tree(source, files):
    tree = {}
    for p in files:
        with open(os.path.join(source, p), "rb") as f:
            tree[p] = f.read()
    return tree


def tree_digest(tree):
    h = hashlib.sha256()
    for p in sorted(tree):
        h.update(p.encode() + b"\0" + hashlib.sha256(tree[p]).digest())
    return h.hexdigest()


def apply(m, tree):
    """(mutated file bytes, None) or (None, why not)."""
    original = tree.get(m["file"])
    if original is None:
        return None, f"{m['file']} is not in the tree"
    text = original.decode("utf-8")
    count = text.count(m["old"])
    if count != 1:
        return None, f"`old` occurs {count} times in {m['file']}"
    return text.replace(m["old"], m["new"]).encode("utf-8"), None


def sync_copy(tree, overrides, dest):
    """Makes dest hold `tree` (with `overrides`), rewriting only files whose bytes differ (ninja then
    rebuilds only what a change touches) and removing stale files (outside dest/build)."""
    wanted = dict(tree)
    wanted.update(overrides)
    written = 0
    for p, data in wanted.items():
        target = os.path.join(dest, p)
        try:
            with open(target, "rb") as f:
                if f.read() == data:
                    continue
        except OSError:
            pass
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = target + ".mutation-tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        mode = 0o755 if data.startswith(b"#!") else 0o644
        os.chmod(tmp, mode)
        os.replace(tmp, target)
        written += 1
    for root, dirs, names in os.walk(dest):
        rel_root = os.path.relpath(root, dest)
        if rel_root == ".":
            dirs[:] = [d for d in dirs if d != "build"]
        for n in names:
            p = os.path.normpath(os.path.join(rel_root, n))
            if p not in wanted:
                os.remove(os.path.join(root, n))
    return written


# ---- tests the sources declare (for --check) -----------------------------------------------------


def declared_targets(tree):
    """{target: [test source paths]} from hipgrad_add_test(...) calls in tests/**/CMakeLists.txt."""
    targets = {}
    for p, data in tree.items():
        if not (p.startswith("tests/") and p.endswith("CMakeLists.txt")):
            continue
        text = data.decode("utf-8", "replace")
        for call in re.finditer(r"hipgrad_add_test\s*\(([^)]*)\)", text):
            words = call.group(1).split()
            if not words:
                continue
            name, sources, in_sources = words[0], [], False
            for w in words[1:]:
                if w == "SOURCES":
                    in_sources = True
                elif w.isupper():
                    in_sources = False
                elif in_sources:
                    sources.append(os.path.normpath(os.path.join(os.path.dirname(p), w)))
            targets[name] = sources
    return targets


def declared_test_names(tree, sources):
    """Names the sources' tests may run under: Suite.Name, Suite/<k>.Name (typed), Prefix/Suite.Name/<k>."""
    names = []
    for s in sources:
        text = tree.get(s, b"").decode("utf-8", "replace")
        for macro, suite, name in re.findall(r"\b(TEST|TEST_F|TYPED_TEST|TYPED_TEST_P|TEST_P)\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)", text):
            if macro == "TEST" or macro == "TEST_F":
                names.append(f"{suite}.{name}")
            elif macro.startswith("TYPED_TEST"):
                names.append(f"{suite}/0.{name}")
                names.append(f"Prefix/{suite}/0.{name}")
            else:
                names.append(f"Prefix/{suite}.{name}/0")
    return names


def filter_patterns(gtest_filter):
    positive, _, negative = gtest_filter.partition("-")
    return [p for p in positive.split(":") if p], [p for p in negative.split(":") if p]


def check_filters(m, tree, targets):
    """Problems: unknown targets, filter patterns that match none of the declared tests."""
    problems = []
    for t in m["targets"]:
        if t not in targets:
            problems.append(f"target {t} is not declared by any tests/**/CMakeLists.txt")
            continue
        names = declared_test_names(tree, targets[t])
        positive, _ = filter_patterns(m["filter"][t])
        for p in positive:
            if not any(fnmatch.fnmatchcase(n, p) for n in names):
                problems.append(f"filter pattern '{p}' matches no test of {t}")
    return problems


# ---- building and running ------------------------------------------------------------------------


def tool_environment():
    env = dict(os.environ)
    # Many test processes share the machine: a few CPU-reference threads each (host/parallel.hpp).
    env.setdefault("HIPGRAD_CPU_THREADS", "4")
    if shutil.which("nvcc", path=env.get("PATH", "")) is None and os.path.exists(os.path.join(CUDA_BIN, "nvcc")):
        env["PATH"] = CUDA_BIN + os.pathsep + env.get("PATH", "")
    return env


def run_logged(cmd, log_path, env):
    """Exit status of cmd (its output appended to log_path); None if the deadline stopped it."""
    if stopper.stopped.is_set():
        return None
    with open(log_path, "ab") as f:
        f.write(("$ " + " ".join(cmd) + "\n").encode())
        f.flush()
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        stopper.register(proc)
        try:
            rc = proc.wait()
        finally:
            stopper.unregister(proc)
    return None if stopper.stopped.is_set() and rc != 0 else rc


DEADLINE_HIT = "the --deadline was reached"


def build(copy_dir, targets, build_jobs, env, log_path):
    """None when built, else why not (DEADLINE_HIT when the deadline stopped it)."""
    build_dir = os.path.join(copy_dir, "build")
    if not os.path.exists(os.path.join(build_dir, "build.ninja")):
        rc = run_logged(["cmake", "-S", copy_dir, "-B", build_dir] + CMAKE_OPTIONS, log_path, env)
        if rc is None:
            return DEADLINE_HIT
        if rc != 0:
            return f"cmake configure failed (exit {rc})"
    rc = run_logged(["cmake", "--build", build_dir, "--target"] + list(targets) + ["-j", str(build_jobs)], log_path, env)
    if rc is None:
        return DEADLINE_HIT
    if rc != 0:
        return f"build failed (exit {rc})"
    return None


def find_binary(build_dir, target):
    for root, _, names in os.walk(build_dir):
        if target in names and os.access(os.path.join(root, target), os.X_OK):
            path = os.path.join(root, target)
            if not path.endswith(".o"):
                return path
    return None


_gtest_help = {}


def supports_option(binary, option, env):
    """Whether the binary's GoogleTest knows --<option> (by its --help)."""
    if binary not in _gtest_help:
        try:
            out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60, env=env)
            _gtest_help[binary] = out.stdout + out.stderr
        except (subprocess.SubprocessError, OSError):
            _gtest_help[binary] = ""
    return option in _gtest_help[binary]


def list_tests(binary, gtest_filter, env):
    """The tests the filter selects (gtest --gtest_list_tests), or None if listing failed."""
    try:
        out = subprocess.run([binary, "--gtest_list_tests", "--gtest_filter=" + gtest_filter], capture_output=True,
                             text=True, timeout=120, env=env)
    except (subprocess.SubprocessError, OSError):
        return None
    if out.returncode != 0:
        return None
    tests, suite = [], None
    for line in out.stdout.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            suite = line.split("#")[0].strip()
        else:
            tests.append(suite + line.split("#")[0].strip())
    return tests


FAILED_RE = re.compile(r"^\[  FAILED  \] ([^\s,]+)")
RUN_RE = re.compile(r"^\[ RUN      \] (\S+)")
ASSERTION_RE = re.compile(r":\d+: Failure$|^unknown file: Failure$")
SKIPPED_SUMMARY_RE = re.compile(r"^\[  SKIPPED \] (\d+) tests?\b")
SUMMARY_RE = re.compile(r"^\[==========\] (\d+) tests? from .* ran")


def run_tests(binary, gtest_filter, timeout, env, log_path, first_failure):
    """Runs binary with the filter; returns a dict: listed, failed (names, in order), skipped,
    ran (from gtest's summary, or None), rc, timed_out, seconds. With first_failure (mutants: one
    failing test is all they need) the run is ended at the first failed assertion, and the test
    that was running is the failed one; the baseline runs every test to its end."""
    listed = list_tests(binary, gtest_filter, env)
    cmd = [binary, "--gtest_filter=" + gtest_filter, "--gtest_color=no"]
    if not first_failure and supports_option(binary, "gtest_brief", env):
        cmd.append("--gtest_brief=1")  # the mutants' runs need the [ RUN ] lines
    failed, skipped, ran, running = [], 0, None, None
    ended_at_failure = False
    start = time.monotonic()
    timed_out = False
    with open(log_path, "ab") as logf:
        logf.write(("$ " + " ".join(cmd) + "\n").encode())
        logf.flush()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        stopper.register(proc)

        def kill():
            nonlocal timed_out
            timed_out = True
            kill_group(proc)

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            for raw in proc.stdout:
                logf.write(raw)
                line = raw.decode("utf-8", "replace").rstrip("\n")
                m = RUN_RE.match(line)
                if m:
                    running = m.group(1)
                m = FAILED_RE.match(line)
                if m and m.group(1) not in failed and "." in m.group(1):
                    failed.append(m.group(1))
                if first_failure and running and ASSERTION_RE.search(line) and not ended_at_failure:
                    if running not in failed:
                        failed.append(running)
                    ended_at_failure = True
                    kill_group(proc)
                m = SKIPPED_SUMMARY_RE.match(line)
                if m:
                    skipped = int(m.group(1))
                m = SUMMARY_RE.match(line)
                if m:
                    ran = int(m.group(1))
            rc = proc.wait()
        finally:
            timer.cancel()
            stopper.unregister(proc)
    stopped = stopper.stopped.is_set() and not timed_out and rc < 0 and not ended_at_failure
    return dict(listed=listed, failed=failed, skipped=skipped, ran=ran, rc=rc, timed_out=timed_out or stopped,
                stopped=stopped, seconds=round(time.monotonic() - start, 1))


def judge(runs):
    """Status and detail of a variant from its test runs ([(target, filter, result)])."""
    failed = [name for _, _, r in runs for name in r["failed"]]
    timed_out = any(r["timed_out"] for _, _, r in runs)
    crashed = [(t, r["rc"]) for t, _, r in runs if not r["timed_out"] and r["rc"] != 0 and not r["failed"]]
    empty = [(t, f) for t, f, r in runs if r["listed"] is not None and not r["listed"]]
    listed = sum(len(r["listed"] or []) for _, _, r in runs)
    skipped = sum(r["skipped"] for _, _, r in runs)
    return dict(failed=failed, timed_out=timed_out, crashed=crashed, empty=empty, listed=listed, skipped=skipped)


def describe_rc(rc):
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit {rc}"


# ---- one variant ---------------------------------------------------------------------------------


class Variant:
    def __init__(self, vid, mutation, targets, filters):
        self.id = vid
        self.mutation = mutation  # None for the baseline
        self.targets = targets
        self.filters = filters  # [(target, filter)]: several per target for the baseline
        self.status = NOT_RUN
        self.detail = ""
        self.failed = []
        self.cached = False
        self.build_seconds = None
        self.test_seconds = None
        self.tests_listed = 0

    def row(self):
        return dict(id=self.id, status=self.status, detail=self.detail, failed=self.failed, cached=self.cached,
                    build_seconds=self.build_seconds, test_seconds=self.test_seconds, tests_listed=self.tests_listed)

    def restore(self, saved):
        for k in ("status", "detail", "failed", "build_seconds", "test_seconds", "tests_listed"):
            setattr(self, k, saved.get(k))
        self.cached = True


def variant_key(v, digest, gpu):
    """What a cached result depends on: the tree, the mutation and its filters, this script, the GPU."""
    with open(os.path.abspath(__file__), "rb") as f:
        script = hashlib.sha256(f.read()).hexdigest()
    spec = dict(id=v.id, mutation=v.mutation, targets=v.targets, filters=v.filters, cmake=CMAKE_OPTIONS, tree=digest,
                script=script, gpu=gpu)
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def failing_cell(v):
    """The table's last column: the first failing tests and their count, or the status and why."""
    cell = v.status
    if v.failed:
        shown = ", ".join(f"`{n}`" for n in v.failed[:SHOWN_FAILURES])
        more = len(v.failed) - SHOWN_FAILURES
        ellipsis = "…" if "timeout" in v.detail else ""  # more may have failed after the timeout
        cell += f": {len(v.failed)}{ellipsis} failed: {shown}" + (f" (+{more} more)" if more > 0 else "")
    if v.detail:
        cell += ("; " if v.failed else ": ") + v.detail
    if v.status not in (CAUGHT, PASS, "BUILT"):
        cell = "**" + cell.replace(": ", "**: ", 1) if ": " in cell else f"**{cell}**"
    return cell


def markdown_escape(text):
    return text.replace("|", "\\|").replace("\n", " ")


# ---- main ----------------------------------------------------------------------------------------


def parse_args(argv):
    cores = os.cpu_count() or 2
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workdir", nargs="?", default="/tmp/hipgrad-mutation", help="where the copies go (default %(default)s)")
    p.add_argument("--jobs", type=int, default=0,
                   help="copies built at once (default: every copy, at most cores / 2)")
    p.add_argument("--build-jobs", type=int, default=0,
                   help="compile jobs per copy (default: the cores shared by the copies built at once, at least 2)")
    p.add_argument("--test-jobs", type=int, default=0, help="test binaries run at once (default: max(2, cores / 2))")
    p.add_argument("--only", default="", help="comma-separated mutation ids (the baseline always runs)")
    p.add_argument("--table", default="", help="also write the markdown table to this file")
    p.add_argument("--timeout", type=float, default=240, help="seconds per test binary run (default %(default)s)")
    p.add_argument("--keep", action="store_true", help="keep the copies and their builds (to resume or inspect)")
    p.add_argument("--deadline", type=float, default=0,
                   help="seconds after which nothing starts and whatever runs is killed; what finished is reported "
                        "(0: none). With --keep a rerun resumes the builds and reuses the results")
    p.add_argument("--fresh", action="store_true", help="ignore results cached in WORKDIR/results")
    p.add_argument("--check", "--dry-run", dest="check", action="store_true",
                   help="apply every mutation in scratch copies and check the filters; no build, no run")
    p.add_argument("--build-only", action="store_true", help="configure and build, run nothing (a compile check)")
    p.add_argument("--skip-baseline", action="store_true", help="leave the baseline out (compile checks only)")
    p.add_argument("--source", default=DEFAULT_SOURCE, help="the tree to copy (default: this checkout, %(default)s)")
    p.add_argument("--mutations", default=os.path.join(HERE, "mutations.py"), help="the mutation list")
    args = p.parse_args(argv)
    args.test_jobs = args.test_jobs or max(2, cores // 2)
    return args


def gpu_name():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30)
        names = [l.strip() for l in out.stdout.splitlines() if l.strip()]
        return ", ".join(names) if out.returncode == 0 and names else "unknown (nvidia-smi found no GPU)"
    except (OSError, subprocess.SubprocessError):
        return "unknown (no nvidia-smi)"


def on_signal(signum, _frame):
    """Killed from outside (a time limit, ^C): take the builds and tests down too (they run in
    sessions of their own, so that a timeout can kill a test binary's whole process group)."""
    stopper.stop()
    log(f"stopped by {signal.Signals(signum).name}")
    os._exit(128 + signum)


def main(argv):
    args = parse_args(argv)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    source = os.path.abspath(args.source)
    workdir = os.path.abspath(args.workdir)
    mutations = load_mutations(args.mutations)

    problems = []
    ids = [m.get("id") for m in mutations]
    for m in mutations:
        for prob in validate_entry(m):
            problems.append(f"{m.get('id', '?')}: {prob}")
    for i in set(i for i in ids if ids.count(i) > 1):
        problems.append(f"{i}: id used twice")
    if problems:
        print("mutations.py has errors:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    if args.only:
        wanted = [s.strip() for s in args.only.split(",") if s.strip() and s.strip() != BASELINE]
        unknown = [w for w in wanted if w not in ids]
        if unknown:
            print(f"--only: unknown ids {', '.join(unknown)} (known: {', '.join(ids)})", file=sys.stderr)
            return 2
        mutations = [next(m for m in mutations if m["id"] == w) for w in wanted]  # in --only's order

    os.makedirs(workdir, exist_ok=True)
    logs = os.path.join(workdir, "logs")
    results_dir = os.path.join(workdir, "results")
    files = source_files(source, workdir)
    tree = read_tree(source, files)
    digest = tree_digest(tree)
    log(f"source {source}: {len(files)} files; {len(mutations)} mutations; workdir {workdir}")

    # The baseline runs, per target, every distinct filter a selected mutation uses.
    variants = []
    if not args.skip_baseline:
        base_targets, base_filters = [], []
        for m in mutations:
            for t in m["targets"]:
                if t not in base_targets:
                    base_targets.append(t)
                if (t, m["filter"][t]) not in base_filters:
                    base_filters.append((t, m["filter"][t]))
        variants.append(Variant(BASELINE, None, base_targets, base_filters))
    for m in mutations:
        variants.append(Variant(m["id"], m, list(m["targets"]), [(t, m["filter"][t]) for t in m["targets"]]))
    # Every copy builds at once where the cores allow (at least two compile jobs each), and the
    # copies share the cores: a few mutations use the whole machine.
    cores = os.cpu_count() or 2
    args.jobs = args.jobs or max(1, min(len(variants), cores // 2))
    args.build_jobs = args.build_jobs or max(2, cores // args.jobs)

    # Apply (and, with --check, check the filters against the declared tests).
    overrides = {}
    declared = declared_targets(tree) if args.check else {}
    for v in variants:
        if v.mutation is None:
            overrides[v.id] = {}
            continue
        mutated, why = apply(v.mutation, tree)
        if why:
            v.status, v.detail = NOT_APPLIED, why
            continue
        overrides[v.id] = {v.mutation["file"]: mutated}
        if args.check:
            issues = check_filters(v.mutation, tree, declared)
            if issues:
                v.status, v.detail = ERROR, "; ".join(issues)

    start = time.monotonic()
    if args.check:
        for v in variants:
            if v.id in overrides:
                dest = os.path.join(workdir, "check", v.id)  # scratch: kept builds stay untouched
                sync_copy(tree, overrides[v.id], dest)
                if v.mutation:
                    with open(os.path.join(dest, v.mutation["file"]), "rb") as f:
                        ok = f.read() == overrides[v.id][v.mutation["file"]]
                    if v.status == NOT_RUN:
                        v.status, v.detail = ("APPLIED", "") if ok else (ERROR, "the copy does not hold the mutated file")
                else:
                    v.status = "COPIED"
                if not args.keep:
                    shutil.rmtree(dest, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(os.path.join(workdir, "check"), ignore_errors=True)
        return report(args, variants, start, None, None, check=True)

    os.makedirs(logs, exist_ok=True)
    os.makedirs(results_dir, exist_ok=True)
    env = tool_environment()
    env.setdefault("GTEST_COLOR", "no")
    # The CPU references of concurrent test binaries share the cores (host/parallel.hpp).
    env.setdefault("HIPGRAD_CPU_THREADS", str(max(2, (os.cpu_count() or 2) // args.test_jobs)))
    # Cached results of unchanged variants.
    gpu = gpu_name()
    keys = {v.id: variant_key(v, digest, gpu) for v in variants}
    if not args.fresh and not args.build_only:
        for v in variants:
            path = os.path.join(results_dir, v.id + ".json")
            if v.id in overrides and os.path.exists(path):
                with open(path) as f:
                    saved = json.load(f)
                if saved.get("key") == keys[v.id] and saved.get("row", {}).get("status") in (CAUGHT, SURVIVED, PASS, FAIL):
                    v.restore(saved["row"])
                    log(f"{v.id}: cached result {v.status}")

    todo = [v for v in variants if v.id in overrides and not v.cached]
    # Longest first: the baseline (every target), then GroupNorm copies (minutes per TU), then the rest.
    if not args.only:
        todo.sort(key=lambda v: (v.id != BASELINE, not any("groupnorm" in t for t in v.targets)))
    if args.deadline > 0:
        stopper.watch(args.deadline)
    test_pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.test_jobs)
    test_futures = []
    times = dict(build_start=None, build_end=None, test_start=None, test_end=None)
    times_lock = threading.Lock()

    def stamp(begin_key, end_key, begin, end):
        with times_lock:
            times[begin_key] = begin if times[begin_key] is None else min(times[begin_key], begin)
            times[end_key] = end if times[end_key] is None else max(times[end_key], end)

    def baseline_runs(filters, binaries):
        """(target, filter) runs that cover every test the mutations' filters select: one exact test
        name each, so that they run in parallel, each with the whole timeout, and none twice (the
        filters as given where listing fails)."""
        runs = []
        for target in dict.fromkeys(t for t, _ in filters):
            names, listed_all = [], True
            for t, f in filters:
                if t != target:
                    continue
                listed = list_tests(binaries[t], f, env)
                if listed is None:
                    listed_all = False
                    break
                names.extend(n for n in listed if n not in names)
            if listed_all and names:
                runs.extend((target, n) for n in names)
            else:
                runs.extend((t, f) for t, f in filters if t == target)
        return runs

    def test_one(v, k, target, gtest_filter, binary, count):
        suffix = f".{k}" if count > 1 else ""
        log_path = os.path.join(logs, f"{v.id}.{target}{suffix}.test.log")
        remaining = stopper.remaining()
        if stopper.stopped.is_set() or (remaining is not None and remaining <= 1):
            return target, gtest_filter, None
        timeout = args.timeout if remaining is None else min(args.timeout, remaining)
        t0 = time.monotonic()
        result = run_tests(binary, gtest_filter, timeout, env, log_path, first_failure=v.mutation is not None)
        if result["timed_out"] and timeout < args.timeout:
            result["stopped"] = True  # the deadline, not the per-run timeout, cut it short
        stamp("test_start", "test_end", t0, time.monotonic())
        return target, gtest_filter, result

    def finish(v, runs):
        if any(r is None for _, _, r in runs):
            v.status, v.detail = NOT_RUN, f"built; {DEADLINE_HIT} before its tests ran"
            log(f"{v.id}: {v.detail}")
            return
        j = judge(runs)
        v.failed, v.tests_listed = j["failed"], j["listed"]
        v.test_seconds = round(max(r["seconds"] for _, _, r in runs), 1) if runs else 0
        stopped = any(r.get("stopped") for _, _, r in runs)
        limit = f"stopped at the --deadline" if stopped else f"timeout after {args.timeout:g} s"
        notes = []
        if j["crashed"]:
            notes.append("; ".join(f"{t} {describe_rc(rc)} without a failed test" for t, rc in j["crashed"]))
        if j["empty"]:
            notes.append("; ".join(f"filter '{f}' selects no test of {t}" for t, f in j["empty"]))
        if v.mutation is None:
            ok = not j["failed"] and not j["crashed"] and not j["timed_out"] and not j["empty"] and not (
                j["skipped"] >= j["listed"] > 0)
            v.status = PASS if ok else (NOT_RUN if stopped and not j["failed"] else FAIL)
            if j["timed_out"]:
                notes.append(limit)
            if ok:
                notes.append(f"all {j['listed']} tests that the mutations' filters select passed" +
                             (f", {j['skipped']} skipped" if j["skipped"] else ""))
        elif j["failed"] or j["crashed"]:
            v.status = CAUGHT
            if j["timed_out"]:
                notes.append(limit)
        elif j["timed_out"]:
            v.status = NOT_RUN if stopped else TIMEOUT
            notes.append(limit + " without a failure")
        elif j["empty"]:
            v.status = ERROR
        elif j["skipped"] >= j["listed"] > 0:
            v.status = NOT_RUN
        else:
            v.status = SURVIVED
            notes.append(f"all {j['listed']} filtered tests passed" + (f" ({j['skipped']} skipped)" if j["skipped"] else ""))
        if j["skipped"] and j["skipped"] >= j["listed"] > 0:
            notes.append("every test skipped (no GPU?)")
        v.detail = "; ".join(notes)
        log(f"{v.id}: {v.status}, {len(v.failed)} failed; {v.detail}")
        if v.status in (CAUGHT, SURVIVED, PASS, FAIL) and not stopped:
            with open(os.path.join(results_dir, v.id + ".json"), "w") as f:
                json.dump(dict(key=keys[v.id], row=v.row()), f, indent=1)

    def build_then_queue_tests(v):
        """Builds v's copy, then queues its test runs (finish() judges once the last one ends), so
        that a build slot is free again while the tests run."""
        dest = os.path.join(workdir, v.id)
        if stopper.stopped.is_set():
            v.status, v.detail = NOT_RUN, DEADLINE_HIT + " before its build started"
            return
        written = sync_copy(tree, overrides[v.id], dest)
        build_log = os.path.join(logs, f"{v.id}.build.log")
        open(build_log, "w").close()
        log(f"{v.id}: building {' '.join(v.targets)} ({written} files written)")
        t0 = time.monotonic()
        jobs = args.build_jobs * len(v.targets) if v.mutation is None else args.build_jobs  # the baseline builds all
        why = build(dest, v.targets, jobs, env, build_log)
        t1 = time.monotonic()
        stamp("build_start", "build_end", t0, t1)
        v.build_seconds = round(t1 - t0, 1)
        if why == DEADLINE_HIT:
            v.status, v.detail = NOT_RUN, f"{why} during the build (rerun with --keep to resume it)"
            log(f"{v.id}: {v.detail}")
            return
        if why:
            v.status, v.detail = BUILD_FAILED, f"{why}; log {build_log}"
            log(f"{v.id}: {v.detail}")
            return
        log(f"{v.id}: built in {v.build_seconds} s")
        if args.build_only:
            v.status, v.detail = "BUILT", f"in {v.build_seconds} s"
            return
        binaries = {t: find_binary(os.path.join(dest, "build"), t) for t in v.targets}
        missing = [t for t, b in binaries.items() if b is None]
        if missing:
            v.status, v.detail = BUILD_FAILED, f"no {', '.join(missing)} binary in {dest}/build"
            return
        runs = v.filters
        if v.mutation is None:
            runs = baseline_runs(v.filters, binaries)
            log(f"{v.id}: {len(runs)} test runs (every test the mutations' filters select, one per process)")
        futures = [test_pool.submit(test_one, v, k, t, f, binaries[t], len(runs)) for k, (t, f) in enumerate(runs)]
        pending = [len(futures)]
        pending_lock = threading.Lock()

        def done(_):
            with pending_lock:
                pending[0] -= 1
                last = pending[0] == 0
            if last:
                try:
                    finish(v, [f.result() for f in futures])
                except Exception as e:  # a bug of this script: report it in the table, go on
                    v.status, v.detail = ERROR, f"{type(e).__name__}: {e}"
                    log(f"{v.id}: {v.detail}")

        v.status, v.detail = NOT_RUN, "tests did not finish"
        for f in futures:
            f.add_done_callback(done)
        with times_lock:
            test_futures.extend(futures)

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as build_pool:
        futures = {build_pool.submit(build_then_queue_tests, v): v for v in todo}
        for f in concurrent.futures.as_completed(futures):
            v = futures[f]
            try:
                f.result()
            except Exception as e:  # a bug of this script: report it in the table, go on
                v.status, v.detail = ERROR, f"{type(e).__name__}: {e}"
                log(f"{v.id}: {v.detail}")
    concurrent.futures.wait(test_futures)
    test_pool.shutdown(wait=True)

    if not args.keep:
        for v in variants:
            shutil.rmtree(os.path.join(workdir, v.id), ignore_errors=True)

    build_wall = times["build_end"] - times["build_start"] if times["build_start"] is not None else None
    test_wall = times["test_end"] - times["test_start"] if times["test_start"] is not None else None
    return report(args, variants, start, build_wall, test_wall, check=False, gpu=gpu)


def report(args, variants, start, build_wall, test_wall, check, gpu=None):
    lines = ["| id | injected bug | file | failing tests |", "| --- | --- | --- | --- |"]
    for v in variants:
        bug = v.mutation["bug"] if v.mutation else "(none: the unmodified tree)"
        file = f"`{v.mutation['file']}`" if v.mutation else "—"
        if check:
            cell = v.status + (f": {v.detail}" if v.detail else "")
        else:
            cell = failing_cell(v) + (" (cached)" if v.cached else "")
        lines.append(f"| {v.id} | {markdown_escape(bug)} | {file} | {markdown_escape(cell)} |")
    table = "\n".join(lines)
    footer = []
    if check:
        footer.append(f"Checked {sum(1 for v in variants if v.mutation)} mutations in {time.monotonic() - start:.1f} s "
                      "(applied in scratch copies; not built, not run).")
    else:
        fmt = lambda s: "—" if s is None else f"{s:.0f} s"
        footer.append(f"GPU: {gpu if gpu else gpu_name()}")
        footer.append(f"Build wall time: {fmt(build_wall)} ({args.jobs} copies at once, -j {args.build_jobs} each); "
                      f"test wall time: {fmt(test_wall)} ({args.test_jobs} binaries at once, {args.timeout:g} s timeout each; "
                      f"overlapping the builds); total {time.monotonic() - start:.0f} s.")
        cached = sum(1 for v in variants if v.cached)
        if cached:
            footer.append(f"{cached} results taken from an earlier run over the same tree (WORKDIR/results).")
    text = table + "\n\n" + "\n".join(footer) + "\n"
    print()
    print(text, end="", flush=True)
    if args.table:
        with open(args.table, "w") as f:
            f.write(text)

    mutants = [v for v in variants if v.mutation]
    if check:
        return 0 if all(v.status == "APPLIED" for v in mutants) else 1
    if args.build_only:
        return 0 if all(v.status == "BUILT" for v in variants) else 1
    baseline_ok = any(v.id == BASELINE and v.status == PASS for v in variants)
    return 0 if baseline_ok and all(v.status == CAUGHT for v in mutants) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
