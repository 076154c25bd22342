"""Entry point inside the sandbox: import torch once, run each stage in a forked child, stream results.

Usage: python -s -P main.py JOB_DIR CHANNEL_FD

The sandbox may start before its job exists (torch imported ahead of time): after hello, the harness
waits for one byte on stdin, the judge's go, before it reads job.json.

The parent never imports the submission. The plain stages (no judge's questions, no earlier stage's output)
run one after another in one child forked from this clean parent (a fork of a torch process per check cost
more than the checks compute); each gets a fresh module of the submission, the parent's random states and
torch's global modes back, its own time limit, CPU budget, log and working directory. When a stage in that
child hangs, crashes or runs out of memory, the child is killed: a stage that crashed or ran out of memory
runs again alone (its verdict is a fresh child's, as every stage's was), and every remaining stage gets a
child of its own, so a hang, crash or monkeypatch costs that stage only. A stage that reads another's output
(the checkpoint reloaded "in a fresh process") and the interactive ones always get a child of their own. The channel fd is closed in every child and
this process is made non-dumpable, so submission code cannot write frames to the judge directly.

An interactive stage (the judge's training) keeps stdin: the child asks the judge (an `ask` frame, relayed
here as it comes) and reads the judge's reply from stdin. Everything it sends is checked by the judge.
"""
import ctypes
import gc
import importlib.util
import json
import marshal
import os
import random
import resource
import select
import signal
import sys
import time
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import runclock  # noqa: E402  (path set just above; -P leaves the script folder off)
import wire  # noqa: E402

PR_SET_DUMPABLE = 4
STDOUT_EXCERPT = 2000
# A stage's budget leaves out at most this many budgets more of waiting for a CPU or the judge (runclock.py): what a
# hostile stage could win by hiding its processes' CPU (children reaped by the kernel), the sandbox's backstop aside.
STRETCH = 4
# A training run waits for nearly every step's answer, about 0.5 ms each: marking those would cost the harness two frames
# and a wake-up per step (measured: 283 of 300 steps, 0.15 s of waits, the run about 5 % slower). A wait is marked
# once it lasts this long; what it took until then counts as the stage's (at most 6 s over 300 steps).
MARK_AFTER_S = 0.02
TRAINS = ("train",)  # the probes that run backward passes (see probes.warm_up_training)
LOG_LIMIT = 16 << 20
CODE_FILE = "submission.code"  # the judge's compilation of submission.py: importlib's magic number, then marshal
PF_EXITING = 0x4  # /proc/PID/stat's flags: the process has begun to exit
SIGKILL_MASK = 1 << (signal.SIGKILL - 1)  # its bit in /proc/PID/status's pending-signal masks


def set_nondumpable() -> None:
    """Forbid same-uid processes (the children) from opening /proc/<our pid>/fd or ptracing us."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def vm_size_bytes() -> int:
    """Current virtual memory size of this process."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def student_frames(exc: BaseException, path: str) -> list[str]:
    """The traceback lines that point into the submission file, innermost last."""
    lines = []
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == path:
            lines.append(f"line {frame.lineno}, in {frame.name}: {(frame.line or '').strip()}")
    return lines[-8:]


def is_oom(exc: BaseException) -> bool:
    """True for Python's and torch's out-of-memory errors."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "not enough memory" in text)


def submission_code(path: str):
    """The submission's code object: the judge's compilation of the same text (submission.code, see
    grader/judge.py write_job) when this interpreter can load it, else compiled here. Either way a check's child
    does not spend its time compiling (2-4 ms in a fresh fork, twice a grading)."""
    try:
        with open(os.path.join(os.path.dirname(path), CODE_FILE), "rb") as fh:
            data = fh.read()
        if data.startswith(importlib.util.MAGIC_NUMBER):
            return located(marshal.loads(data[len(importlib.util.MAGIC_NUMBER):]), path)
    except (OSError, ValueError, EOFError, TypeError):
        pass  # none, or from another Python: compile it here
    with open(path, "rb") as fh:
        return compile(fh.read(), path, "exec", dont_inherit=True)


def located(code, path: str):
    """code (and every function in it) with its file set to path, where tracebacks and linecache look."""
    consts = tuple(located(c, path) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=path, co_consts=consts)


def receiver(fd: int, max_blob: int, send):
    """A function that returns the judge's next reply on fd as (header, blob); EOFError once the judge is gone.
    A wait for it longer than MARK_AFTER_S is marked with send (waiting, heard): the judge's time, which the stage's
    budget does not count."""
    reader, pending = wire.FrameReader(max_blob), []

    def receive():
        while not pending:
            waiting = not select.select([fd], [], [], MARK_AFTER_S)[0]
            if waiting:
                send({"type": "waiting"})
            data = os.read(fd, 1 << 20)
            if waiting:
                send({"type": "heard"})
            if not data:
                raise EOFError("the judge closed the channel")
            pending.extend(reader.feed(data))
        return pending.pop(0)
    return receive


def close_fds_except(*keep: int) -> None:
    """Close every descriptor above stdio but those in keep."""
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


def child_main(stage, job_dir, write_fd, inputs_blob, prev_blob, probes, max_blob):
    """Run one stage in this forked child and report on write_fd; never returns."""
    send = lambda header, blob=b"": wire.write_frame(write_fd, header, blob)  # noqa: E731
    path = os.path.join(job_dir, "submission.py")
    try:
        os.setsid()
        stage_dir = os.path.join(job_dir, "scratch", stage["key"])
        os.makedirs(stage_dir, exist_ok=True)
        os.chdir(stage_dir)
        log = os.open("output.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        if not stage.get("interactive"):
            # An interactive stage (the judge's training) keeps stdin: the judge's replies arrive there.
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        # Nothing but stdio and our own pipe survives into student code.
        close_fds_except(write_fd)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        budget = float(stage["budget_s"])
        resource.setrlimit(resource.RLIMIT_CPU, (int(budget) + 2, int(budget) + 3))
        resource.setrlimit(resource.RLIMIT_FSIZE, (LOG_LIMIT, LOG_LIMIT))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        mem = vm_size_bytes() + int(stage["mem_mb"]) * (1 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        inputs = probes.load_inputs(inputs_blob, prev_blob)
        probe = probes.PROBES[stage["probe"]]
        if stage.get("interactive"):
            probes.open_channel(send, receiver(0, max_blob, send))
        substitute = stage.get("params", {}).get("substitute")
        if substitute:  # a root-cause diagnosis (grader/rootcause.py): the judge's functions, bound before the import
            import reference_parts
        send({"type": "progress", "phase": "import"})
        module = fresh_submission(path, submission_code(path), probes)
        if substitute:
            reference_parts.substitute(module, substitute)
        send({"type": "progress", "phase": "run"})
        tensors, facts = probe(module, inputs, stage.get("params", {}))
        send({"type": "result", "outcome": "ok", "facts": facts}, probes.dump_outputs(tensors))
    except probes.Violation as exc:
        send({"type": "result", "outcome": "violation", "message": str(exc)[:1000]})
    except BaseException as exc:  # the sandbox boundary: any student failure becomes a status
        outcome = "oom" if is_oom(exc) else "error"
        message = f"{type(exc).__name__}: {exc}"[:1000]
        try:
            send({"type": "result", "outcome": outcome, "message": message,
                  "traceback": student_frames(exc, path)})
        except BaseException:
            os._exit(71)  # our own pipe failed: the parent sees the stage end without a result, not a clean exit
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()  # the student's prints, so they can see them
            except BaseException:
                pass
        os._exit(0)


def stage_waits(pid: int, paused=None) -> "runclock.HeldBack":
    """A stage clock's waited(): the time the stage's child, or this process reading its frames, waited for a CPU,
    and (paused) the child's waits for the judge's answers, bounded by the CPU this sandbox's processes left unused:
    none of it is the stage's own time (runclock.py)."""
    me, uid = os.getpid(), runclock.real_uid(pid)  # the sandbox's uid: every process it started has it

    def waits():
        child, own = runclock.run_delay(pid), runclock.run_delay(me)
        if child is None or own is None:
            return None
        return child + own + (paused() if paused is not None else 0.0)
    return runclock.HeldBack(waits, lambda: None if uid is None else runclock.uid_cpu_seconds(uid))


def stage_clock(stage, pid: int, started: float) -> "runclock.Deadline":
    """A grouped stage's clock: its budget from started, less what held it back (stage_waits)."""
    budget = float(stage["budget_s"])
    return runclock.Deadline(budget, stage_waits(pid), STRETCH * budget, started)


def read_stage(read_fd, pid, budget, max_blob, relay=None):
    """Collect the child's frames until it exits or the budget runs out; return what happened.

    relay: for an interactive stage, where the child's questions to the judge go (its `ask` frames), as they come.
    """
    reader = wire.FrameReader(max_blob)
    paused = runclock.Pauses()  # an interactive stage's waits for the judge's answers
    clock = runclock.Deadline(budget, stage_waits(pid, paused), STRETCH * budget)
    state = {"phase": "start", "result": None, "timed_out": False, "broken": None, "exited": False}
    status = None
    while True:
        remaining = clock.remaining()
        if remaining <= 0:
            state["timed_out"] = True
            break
        ready, _, _ = select.select([read_fd], [], [], min(remaining, 0.05))
        data = os.read(read_fd, 1 << 20) if ready else None
        if data:
            try:
                frames = reader.feed(data)
            except wire.FrameError as exc:
                state["broken"] = str(exc)
                break
            for header, blob in frames:
                if header.get("type") == "progress" and header.get("phase") in ("import", "run"):
                    state["phase"] = header["phase"]
                elif header.get("type") == "result" and state["result"] is None:
                    state["result"] = (header, blob)
                elif header.get("type") == "ask" and relay is not None:
                    relay(header, blob)
                elif header.get("type") == "waiting" and relay is not None:
                    paused.begin()
                elif header.get("type") == "heard":
                    paused.end()
            continue
        if data == b"":
            break
        # No data this round: a child that has exited while a grandchild holds the pipe is done too.
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            state["exited"] = True
            break
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    if not state["exited"]:
        _, status = os.waitpid(pid, 0)
    state["status"], state["waited_s"] = status, clock.waited_s()
    if state["result"] is None:  # killed or died: what it started frees its memory before the next stage runs
        await_group_gone(pid)
    return state


def stage_header(stage, state, elapsed, log_path):
    """Turn what the parent saw into the stage_end frame for the judge."""
    header = {"type": "stage_end", "stage": stage["key"], "phase": state["phase"], "duration_s": round(elapsed, 4)}
    header.update(read_log(log_path))
    result = state["result"]
    if result is not None:
        child, blob = result
        outcome = child.get("outcome")
        header["status"] = outcome if outcome in ("ok", "error", "violation", "oom") else "crash"
        for key in ("message", "traceback", "facts"):
            if key in child:
                header[key] = child[key]
        return header, blob if header["status"] == "ok" else b""
    status = state["status"] or 0
    if state["timed_out"]:
        waited = state.get("waited_s") or 0.0
        more = f"; {waited:.1f} s more spent waiting for a CPU or the judge, not counted" if waited >= 0.1 else ""
        header.update(status="timeout",
                      message=f"did not finish within {stage['budget_s']} s (during {state['phase']}{more})")
    elif state["broken"]:
        header.update(status="crash", message=f"the stage's output was malformed or too large: {state['broken']}")
    elif os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGXCPU:
            header.update(status="timeout", message=f"used more than {stage['budget_s']} s of CPU time (during {state['phase']})")
        elif sig == signal.SIGKILL:
            header.update(status="oom", message=f"killed by SIGKILL during {state['phase']}, most likely by the memory limit")
        else:
            header.update(status="crash", signal=name, message=f"the process died from {name} during {state['phase']}")
    else:
        code = os.WEXITSTATUS(status)
        where = "while the submission was being imported" if state["phase"] == "import" else f"during {state['phase']}"
        header.update(status="crash", exit_code=code,
                      message=f"the process exited with code {code} {where} without returning results "
                              f"(does the submission call os._exit or exit at import time?)")
    return header, b""


def read_log(log_path):
    """The start of what the stage printed, for the student's eyes only."""
    try:
        size = os.path.getsize(log_path)
        with open(log_path, "rb") as fh:
            text = fh.read(STDOUT_EXCERPT).decode("utf-8", "replace")
    except OSError:
        return {}
    return {"stdout": text, "stdout_bytes": size} if size else {}


def run_stage(stage, job_dir, probes, inputs_blob, prev_blob, max_blob, channel):
    """Fork one child for the stage and turn its fate into a frame."""
    read_fd, write_fd = os.pipe()
    wire.widen(write_fd)  # the training stage's answers pass here, then through the channel
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        child_main(stage, job_dir, write_fd, inputs_blob, prev_blob, probes, max_blob)
    os.close(write_fd)
    relay = None
    if stage.get("interactive"):
        # Only the header's kind, step and weights digest pass, under this stage's key: the judge validates the rest.
        relay = lambda header, blob: wire.write_frame(channel, {  # noqa: E731
            "type": "ask", "stage": stage["key"], "kind": str(header.get("kind"))[:20],
            "step": header.get("step") if isinstance(header.get("step"), int) else -1,
            "weights": str(header.get("weights"))[:64]}, blob)
    try:
        state = read_stage(read_fd, pid, float(stage["budget_s"]), max_blob, relay)
    finally:
        os.close(read_fd)
    log_path = os.path.join(job_dir, "scratch", stage["key"], "output.txt")
    return stage_header(stage, state, time.monotonic() - started, log_path)


def groupable(stage) -> bool:
    """A stage that may share the one child: no judge's questions, no earlier stage's output, no substitution."""
    return (not stage.get("interactive") and not stage.get("input_from")
            and not stage.get("params", {}).get("substitute") and not stage.get("own_child"))


def cpu_seconds() -> float:
    """This process's CPU seconds so far (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def stat_fields(pid, proc: str = "/proc") -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (state first), None when it cannot be read."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as fh:
            text = fh.read()
    except OSError:
        return None  # gone, or not ours to read
    # The command name is in parentheses and may itself hold ")" or spaces: the fields start after the last ")".
    _, paren, rest = text.rpartition(b")")
    return rest.split() if paren else None


def child_cpu_seconds(pid: int) -> float | None:
    """A child's CPU seconds (all its threads) from /proc, None when it cannot be read."""
    fields = stat_fields(pid)
    try:
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (TypeError, IndexError, ValueError):
        return None


class Baseline:
    """The global state every stage starts from, as a child forked from the clean harness finds it."""

    def __init__(self, torch):
        self.torch = torch
        self.rng = torch.get_rng_state()
        self.py_random = random.getstate()
        self.dtype = torch.get_default_dtype()
        self.deterministic = torch.are_deterministic_algorithms_enabled()
        self.anomaly = torch.is_anomaly_enabled()

    def restore(self, probes) -> None:
        """Put back what a stage may have changed that another stage's verdict could read."""
        torch = self.torch
        torch.set_rng_state(self.rng)
        random.setstate(self.py_random)
        probes._set_default_dtype(self.dtype)
        torch.set_grad_enabled(True)
        torch.set_num_threads(1)
        if torch.are_deterministic_algorithms_enabled() != self.deterministic:  # setting it imports ~800 modules
            torch.use_deterministic_algorithms(self.deterministic)
        if torch.is_anomaly_enabled() != self.anomaly:
            torch.autograd.set_detect_anomaly(self.anomaly)
        try:
            torch.set_default_device(None)
        except Exception:
            pass
        del probes.TRIPWIRE_CALLS[:]
        probes._CHANNEL.clear()
        sys.modules.pop("submission", None)


def fresh_submission(path: str, code, probes):
    """A new module `submission` executed from the file's code object (what importing the file does), each
    generator it may draw from besides torch's at one state."""
    probes.seed_generators(0)
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = module
    exec(code, module.__dict__)
    return module


def group_main(stages, job_dir, write_fd, probes, baseline, ack_fd):
    """Run the stages one after another in this forked child, reporting each on write_fd and waiting on ack_fd for
    the parent to have passed the report on; never returns."""
    send = lambda header, blob=b"": wire.write_frame(write_fd, header, blob)  # noqa: E731
    path = os.path.join(job_dir, "submission.py")
    code = None
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        close_fds_except(write_fd, ack_fd)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (LOG_LIMIT, LOG_LIMIT))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        # As much address space as a stage forked alone gets (the harness's size + the stage's allowance)
        mem = vm_size_bytes() + max(int(s["mem_mb"]) for s in stages) * (1 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        # CPU: the hard limit is the sum of the stages' own (what forks per stage allowed in all); each stage's
        # soft limit is its own budget (SIGXCPU), and the parent also measures each stage's CPU from outside.
        cpu_hard = int(cpu_seconds()) + sum(int(float(s["budget_s"])) + 3 for s in stages) + 1
        blobs = [read_inputs(job_dir, s) for s in stages]
    except BaseException:
        os._exit(70)
    for index, stage in enumerate(stages):
        try:
            stage_dir = os.path.join(job_dir, "scratch", stage["key"])
            os.makedirs(stage_dir, exist_ok=True)
            os.chdir(stage_dir)
            log = os.open("output.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.close(log)
            soft = min(cpu_hard, int(cpu_seconds()) + int(float(stage["budget_s"])) + 2)
            resource.setrlimit(resource.RLIMIT_CPU, (soft, cpu_hard))
            baseline.restore(probes)
            inputs = probes.load_inputs(blobs[index], None)
            probe = probes.PROBES[stage["probe"]]
            send({"type": "progress", "index": index, "phase": "import"})
            if code is None:
                code = submission_code(path)
            module = fresh_submission(path, code, probes)
            send({"type": "progress", "index": index, "phase": "run"})
            tensors, facts = probe(module, inputs, stage.get("params", {}))
            blob = probes.dump_outputs(tensors)
            del module, tensors, inputs
            flush_std()  # the parent reads this stage's output file as soon as its result comes
            send({"type": "result", "index": index, "outcome": "ok", "facts": facts}, blob)
        except probes.Violation as exc:
            flush_std()
            send({"type": "result", "index": index, "outcome": "violation", "message": str(exc)[:1000]})
        except BaseException as exc:  # the sandbox boundary: any student failure becomes a status
            outcome = "oom" if is_oom(exc) else "error"
            message = f"{type(exc).__name__}: {exc}"[:1000]
            flush_std()
            try:
                send({"type": "result", "index": index, "outcome": outcome, "message": message,
                      "traceback": student_frames(exc, path)})
            except BaseException:
                os._exit(71)  # our own pipe is gone: the parent sees this stage end without a result
        wait_ack(ack_fd)
    os._exit(0)


def wait_ack(ack_fd: int) -> None:
    """Block until the parent has passed the stage's verdict on: a next stage that kills the parent cannot take this
    verdict with it (unread in the pipe, it would be lost). No parent: nothing more to run for."""
    try:
        if os.read(ack_fd, 1):
            return
    except BaseException:
        pass
    os._exit(72)


def flush_std() -> None:
    """Write out what the stage printed (a student may have replaced or closed the streams)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass


def run_group(stages, spare, max_blob, channel, outputs, after_fork=None):
    """Run the stages in one child (a spare); send each stage_end as it comes. Returns (index of the stage that did
    not finish or len(stages), its header) once the child is done or was killed."""
    job_dir = spare.job_dir
    spare.order({"run": "group", "stages": stages})
    pid, read_fd, ack_w = spare.pid, spare.read_fd, spare.order_w  # its order pipe carries the "passed on" after each result
    if after_fork is not None:
        after_fork()
    reader = wire.FrameReader(max_blob)
    index, failed = 0, None
    state = {"phase": "start", "result": None, "timed_out": False, "broken": None, "exited": False, "status": None}
    started = time.monotonic()
    cpu_start = child_cpu_seconds(pid) or 0.0
    clock = stage_clock(stages[0], pid, started)
    wire.write_frame(channel, {"type": "stage_start", "stage": stages[0]["key"]})
    try:
        while index < len(stages):
            budget = float(stages[index]["budget_s"])
            remaining = clock.remaining()
            if remaining <= 0:
                state["timed_out"] = True
                break
            ready, _, _ = select.select([read_fd], [], [], min(remaining, 0.05))
            data = os.read(read_fd, 1 << 20) if ready else None
            if data:
                try:
                    frames = reader.feed(data)
                except wire.FrameError as exc:
                    state["broken"] = str(exc)
                    break
                for header, blob in frames:
                    if index >= len(stages) or header.get("index") != index:
                        continue  # not the stage running now: nothing of it is read
                    if header.get("type") == "progress" and header.get("phase") in ("import", "run"):
                        state["phase"] = header["phase"]
                    elif header.get("type") == "result":
                        state["result"] = (header, blob)
                        stage = stages[index]
                        log_path = os.path.join(job_dir, "scratch", stage["key"], "output.txt")
                        end, out = stage_header(stage, state, time.monotonic() - started, log_path)
                        wire.write_frame(channel, end, out)
                        if end["status"] == "ok":
                            outputs[stage["key"]] = out
                        index += 1
                        state.update(phase="start", result=None)
                        started = time.monotonic()
                        cpu_start = child_cpu_seconds(pid) or cpu_start
                        if index < len(stages):
                            wire.write_frame(channel, {"type": "stage_start", "stage": stages[index]["key"]})
                        try:
                            os.write(ack_w, b"a")
                        except OSError:
                            pass  # the child is gone: the loop finds out
                        if index < len(stages):  # after the go: its /proc reads are not on the stage's path
                            clock = stage_clock(stages[index], pid, started)
                continue
            if data == b"":
                break
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                state.update(exited=True, status=status)
                break
            used = child_cpu_seconds(pid)
            if used is not None and used - cpu_start > budget + 3:
                state["cpu_exceeded"] = True
                break
    finally:
        for kill in (os.killpg, os.kill):  # the group (what the stages started) and the child, had it no group yet
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass
        # Reaped, always: without bwrap's namespace an orphan goes to the machine's PID 1, which may never reap it, and
        # a zombie counts against the uid's process limit in every later run. Once every stage has reported, its
        # status says nothing more: it is reaped after the job's done (its exit, 4-7 ms of a torch fork's teardown,
        # then overlaps the stages after it instead of delaying them).
        if not state["exited"] and index == len(stages):
            LATE.append(pid)
        elif not state["exited"]:
            _, state["status"] = os.waitpid(pid, 0)
        if index < len(stages):  # a stage did not finish: its helpers free their memory before the next stage runs
            await_group_gone(pid)
            state["waited_s"] = clock.waited_s()
        os.close(read_fd)
        os.close(ack_w)
    if index < len(stages):
        stage = stages[index]
        log_path = os.path.join(job_dir, "scratch", stage["key"], "output.txt")
        if state.pop("cpu_exceeded", False):
            failed = {"type": "stage_end", "stage": stage["key"], "phase": state["phase"],
                      "duration_s": round(time.monotonic() - started, 4), **read_log(log_path), "status": "timeout",
                      "message": f"used more than {stage['budget_s']} s of CPU time (during {state['phase']})"}
        else:
            failed, _ = stage_header(stage, state, time.monotonic() - started, log_path)
    return index, failed


LATE: list[int] = []  # children killed once they had reported everything: reaped after the job's done
LENGTH = 8  # bytes of the length before each message a spare is sent
SPARES = 2  # forked ahead: a correctness job's shared child and its checkpoint's fresh one


def read_exact(fd: int, size: int) -> bytes | None:
    """size bytes from fd (never more: what follows is the next message), or None if it closes first."""
    data = bytearray()
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def read_sized(fd: int) -> bytes | None:
    """One length-prefixed message from fd, or None if it closes first."""
    head = read_exact(fd, LENGTH)
    return None if head is None else read_exact(fd, int.from_bytes(head, "big"))


def sized(data: bytes) -> bytes:
    return len(data).to_bytes(LENGTH, "big") + data


class Spare:
    """A child forked from the clean harness that waits on its order pipe for what to run: a group of stages, or one
    stage once the output it reads is sent. Forked before the job arrives (a sandbox started ahead waits anyway), or
    while the shared child runs for a stage that reads its output: either way its fork is off the grading's path."""

    def __init__(self, job_dir, probes, baseline):
        self.job_dir = job_dir
        self.read_fd, write_fd = os.pipe()  # its frames
        order_r, self.order_w = os.pipe()  # its order, then the acks (a group) or the output its stage reads
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self.read_fd)
            os.close(self.order_w)
            spare_main(job_dir, write_fd, order_r, probes, baseline)
        os.close(write_fd)
        os.close(order_r)

    def alive(self) -> bool:
        """Still waiting for its order (one killed while it waited, say by the memory limit, is reaped here; one
        killed but not yet dead counts as dead: it would never run its order, and its stage would be charged)."""
        try:
            if os.waitpid(self.pid, os.WNOHANG) != (0, 0):
                return False
        except ChildProcessError:
            return False
        return not dying(self.pid)

    def order(self, order: dict) -> None:
        """Tell it what to run (before any student code runs in it, so the pipe is ours)."""
        try:
            wire_write_all(self.order_w, sized(json.dumps(order).encode()))
        except OSError:
            pass  # it died: reading its frames finds out how

    def wait_for(self, stage, max_blob: int) -> "Spare":
        """Order it to run one stage once it is sent the output that stage reads (see finish)."""
        self.order({"run": "stage", "stage": stage, "max_blob": max_blob})
        return self

    def finish(self, stage, prev_blob, max_blob: int):
        """Send it the output its stage reads and turn its fate into a frame, as run_stage does."""
        started = time.monotonic()
        try:
            wire_write_all(self.order_w, sized(prev_blob or b""))
        except OSError:
            pass  # it died: read_stage sees how
        try:
            state = read_stage(self.read_fd, self.pid, float(stage["budget_s"]), max_blob)
        finally:
            self.close()
        log_path = os.path.join(self.job_dir, "scratch", stage["key"], "output.txt")
        return stage_header(stage, state, time.monotonic() - started, log_path)

    def cancel(self) -> None:
        """One whose stage will not run: killed and reaped."""
        self.close()
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass
        os.waitpid(self.pid, 0)

    def close(self) -> None:
        """Close the harness's ends of its pipes."""
        os.close(self.read_fd)
        os.close(self.order_w)


def spare_main(job_dir, write_fd, order_r, probes, baseline):
    """A spare's life: wait for its order, then run it; exit when no order comes (the harness is gone or did not
    need it). Never returns."""
    try:
        close_fds_except(write_fd, order_r)  # the channel first: only the harness holds it
        if baseline is not None:  # forked ahead of the job: its wait is free time
            probes.warm_up_checks()
            baseline.restore(probes)
        order = read_sized(order_r)
        order = json.loads(order) if order is not None else None
    except BaseException:
        os._exit(0)
    if order is None:
        os._exit(0)
    if order["run"] == "group":
        group_main(order["stages"], job_dir, write_fd, probes, baseline, order_r)
    stage = order["stage"]
    try:
        inputs_blob = read_inputs(job_dir, stage)
        prev_blob = read_sized(order_r)  # blocks until the stage it reads has finished
        if prev_blob is None:
            os._exit(0)  # not needed: the stage it reads did not finish
    except BaseException:
        os._exit(0)
    os.close(order_r)
    child_main(stage, job_dir, write_fd, inputs_blob, prev_blob, probes, int(order["max_blob"]))


def dying(pid: int, proc: str = "/proc") -> bool:
    """A SIGKILL is pending for pid, or it is already exiting: dead, though not yet a zombie waitpid can reap. False
    when /proc does not say (the spare is then ordered, as before)."""
    try:
        flags = int(stat_fields(pid, proc)[6])
        with open(f"{proc}/{pid}/status", "rb") as fh:
            pending = [int(line.split()[1], 16) for line in fh if line.startswith((b"SigPnd:", b"ShdPnd:"))]
    except (OSError, ValueError, IndexError, TypeError):
        return False
    return bool(flags & PF_EXITING) or any(mask & SIGKILL_MASK for mask in pending)


def await_group_gone(pgid: int, limit_s: float = 3.0, proc: str = "/proc") -> bool:
    """Wait until no process of the killed group pgid is left but zombies (whose memory is freed), at most limit_s;
    True once none is. A killed stage's helpers free their memory only as they exit, after the kill returns: the
    next stage, started at once, would find the sandbox's memory still full (its own pipe writes then fail)."""
    deadline = time.monotonic() + limit_s
    while True:
        if not group_alive(pgid, proc):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def group_alive(pgid: int, proc: str = "/proc") -> bool:
    """Some process of group pgid is still running or exiting (not yet a zombie); False when /proc cannot say."""
    try:
        pids = [name for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return False
    for pid in pids:
        fields = stat_fields(pid, proc)  # None: gone meanwhile
        if fields and len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] not in (b"Z", b"X"):
            return True
    return False


def take(spares: list):
    """The next spare forked ahead that still waits, or None."""
    while spares:
        spare = spares.pop(0)
        if spare.alive():
            return spare
        spare.close()
    return None


def wire_write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_inputs(job_dir, stage) -> bytes:
    """The judge's inputs of one stage (safetensors bytes)."""
    with open(os.path.join(job_dir, "inputs", stage["key"] + ".safetensors"), "rb") as fh:
        return fh.read()


def wait_for_go(job_dir) -> bool:
    """Block until the judge has laid out the job: a byte on stdin (the process backend) or, when stdin is
    empty (docker copies the job in before the start), job.json already there. False: no job is coming."""
    try:
        go = os.read(0, 1)
    except OSError:
        go = b""
    return bool(go) or os.path.exists(os.path.join(job_dir, "job.json"))


def main(argv):
    """Import torch once, then run every stage of the job."""
    job_dir, channel = argv[1], int(argv[2])
    set_nondumpable()
    started = time.monotonic()
    import torch

    # A child forked after a multi-threaded op hangs; one thread keeps fork safe and runs deterministic.
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    import probes

    probes.install_tripwires()
    # No go yet once torch is in: a sandbox started ahead, waiting for a job, so the time is free to warm up the
    # training loop (a cold start's judge has written its job and the go by now, and warms up only if it trains).
    warmed = not select.select([0], [], [], 0)[0]
    if warmed:
        probes.warm_up_training()
    # What is loaded so far lives as long as the harness: out of the collector's sight, a check's child neither
    # scans it nor, by touching its headers, copies its pages.
    gc.freeze()
    baseline = Baseline(torch)
    # While it waits, a sandbox started ahead also forks the children its job will run in (the shared child and the
    # checkpoint's fresh one): a fork of this process takes 4-7 ms here, each on the grading's path otherwise.
    spares = [Spare(job_dir, probes, baseline) for _ in range(SPARES)] if warmed else []
    hello = {"type": "hello", "torch": torch.__version__, "python": sys.version.split()[0],
             "threads": torch.get_num_threads(), "import_s": round(time.monotonic() - started, 4), "pid": os.getpid()}
    wire.write_frame(channel, hello)
    if not wait_for_go(job_dir):
        return  # a sandbox started ahead and then discarded: there is no job
    with open(os.path.join(job_dir, "job.json")) as fh:
        job = json.load(fh)
    if not warmed and any(stage["probe"] in TRAINS for stage in job["stages"]):
        probes.warm_up_training()  # once here rather than in each training stage's child
    max_blob = int(job.get("max_output_mb", 256)) << 20
    outputs = {}
    stages = job["stages"]
    grouped = [s for s in stages if groupable(s)] if job.get("one_child", True) else []
    alone, restarted = [], None  # the grouped stages that did not finish in the shared child: each alone
    waiting = {}  # stage key -> a spare ordered to run a stage that reads a grouped stage's output
    if len(grouped) > 1:
        keys = {s["key"] for s in grouped}

        def fork_waiting():  # while the shared child runs: a fork the harness needs then overlaps the checks
            for stage in stages:
                if stage.get("input_from") in keys and not stage.get("interactive") \
                        and not stage.get("params", {}).get("substitute"):
                    waiting[stage["key"]] = (take(spares) or Spare(job_dir, probes, None)).wait_for(stage, max_blob)
        spare = take(spares) or Spare(job_dir, probes, baseline)
        done, failed = run_group(grouped, spare, max_blob, channel, outputs, fork_waiting)
        if failed is not None:
            if failed["status"] in ("timeout",):
                wire.write_frame(channel, failed)  # it had its budget: a hang costs that check once
            else:
                restarted = grouped[done]["key"]  # crashed or ran out of memory: its verdict is a fresh child's
                alone.append(restarted)
            alone.extend(s["key"] for s in grouped[done + 1:])
        grouped = [s for s in grouped if s["key"] not in alone]
    else:
        grouped = []
    ran = {s["key"] for s in grouped}
    for stage in stages:
        if stage["key"] in ran:
            continue
        if stage["key"] != restarted:
            wire.write_frame(channel, {"type": "stage_start", "stage": stage["key"]})
        child = waiting.pop(stage["key"], None)  # a spare already ordered to run this stage
        source = stage.get("input_from")
        if source and source not in outputs:  # e.g. evaluation without a trained model: nothing to run it on
            if child is not None:
                child.cancel()
            wire.write_frame(channel, {"type": "stage_end", "stage": stage["key"], "status": "skipped",
                                       "message": f"needs the output of {source}, which did not finish",
                                       "duration_s": 0.0})
            continue
        prev_blob = outputs.get(source or "")
        if child is None and not stage.get("interactive"):
            spare = take(spares)
            child = spare.wait_for(stage, max_blob) if spare is not None else None
        if child is not None:
            header, blob = child.finish(stage, prev_blob, max_blob)
        else:
            header, blob = run_stage(stage, job_dir, probes, read_inputs(job_dir, stage), prev_blob, max_blob,
                                     channel)
        if header["status"] == "ok":
            outputs[stage["key"]] = blob
        wire.write_frame(channel, header, blob)
    wire.write_frame(channel, {"type": "done"})
    for pid in LATE:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main(sys.argv)
    # Everything is sent: skip the interpreter's teardown (with torch loaded it takes a large share of a
    # second, on every grading's latency path). Nothing is buffered: frames go out with os.write.
    os._exit(0)
