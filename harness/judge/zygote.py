"""The judge's fork server: imports torch once, then forks a worker per request.

Run only by :class:`harness.judge.isolation.Zygote` as ``python -s -c <this
source> <judge pid> <socket fd>`` (the source comes from the judge's memory);
never imported. It must not import ``harness``: a worker it forks imports the
judge's private copy from its own folder, exactly as a worker started with
``python -s -m harness.judge.worker`` does. Only the standard library, numpy,
torch and the modules the judge names after the socket (for a GPU run, what
torch.compile and Triton import: ``isolation.GPU_PRELOAD``) are loaded before
a fork.

For each request (a JSON header and, by SCM_RIGHTS, the worker's log and its
pipes and payload areas) it double-forks: the grandchild is re-parented to the
judge (a child subreaper), waits until it is, then becomes the worker the
Popen path would start: its own session, stdin /dev/null, stdout and stderr
the log, the passed descriptors at the judge's numbers and no other, the
worker's environment, working directory and ``sys.path``, dumpable again as an
exec'd process is; then ``runpy`` runs ``harness.judge.worker`` as ``-m`` does.
The zygote itself dies with the judge and is non-dumpable (a worker cannot
ptrace it or read its memory).
"""

import ctypes
import fcntl
import gc
import json
import os
import signal
import socket
import sys
import time

PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
#: The environment of the preload (see :func:`preload`); a worker runs with its own.
PRELOAD_ENV = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1", "TORCH_WARM_POOL": "0"}


def _prctl(option, value):
    ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def serve(judge, sock):
    """Answer fork requests until the judge closes the socket; returns (request, fds) in a forked worker."""
    sock.send(b'{"ready": true}')
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 16)
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)
        request = json.loads(data)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                sock.close()
                grandchild = os.fork()
                if grandchild:
                    os.write(w, str(grandchild).encode())
                    os._exit(0)
                os.close(w)
                return request, fds
            except BaseException:
                os._exit(127)
        os.close(w)
        for fd in fds:
            os.close(fd)
        os.waitpid(pid, 0)
        with os.fdopen(r, "rb") as reader:
            got = reader.read()
        sock.send(json.dumps({"pid": int(got)} if got else {"error": "fork failed"}).encode())


def become_worker(judge, request, fds):
    """In the grandchild: set up what ``python -s -m harness.judge.worker`` run by Popen gets, then run it."""
    deadline = time.monotonic() + 10
    while os.getppid() != judge:  # the intermediate exited: re-parented to the judge (a subreaper)
        if time.monotonic() > deadline:
            os._exit(127)
        time.sleep(0.001)
    os.setsid()
    _prctl(PR_SET_DUMPABLE, 1)
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 1000) for fd in fds]  # out of the way of the target numbers
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(high[0], 1)
    os.dup2(high[0], 2)
    targets = request["fds"]
    for fd, target in zip(high[1:], targets):
        os.dup2(fd, target)
    keep = {0, 1, 2, *targets}
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = os.getcwd()  # as -m puts it
    where = sys.path.index(request["placeholder"])  # the zygote's PYTHONPATH began with it
    sys.path[where:where + 1] = request["path_prefix"]
    sys.argv = ["-m", *request["args"]]
    import importlib
    import runpy

    importlib.invalidate_caches()
    sys.path_importer_cache.clear()
    runpy._run_module_as_main(request["module"], alter_argv=True)


def preload(names):
    """Import numpy, torch and ``names``; return why a fork of this process could not serve as a
    worker (None: it can): see :func:`fork_problem`.

    While ``names`` are imported, torch answers "is CUDA available?" from NVML rather than from the
    driver, and inductor starts no pool of compile processes; NVML is shut down afterwards, with
    its threads. On the H100 host importing torch._inductor.compile_fx asked the driver (a fork can
    then no longer start CUDA: "Cannot re-initialize CUDA in forked subprocess"), and NVML left
    running made a forked worker see no GPU (results/speed/20261124-H100/README.md).
    """
    import importlib

    import numpy  # noqa: F401
    import torch  # noqa: F401

    threads = _os_threads()  # torch's own, as in every zygote so far
    saved = {key: os.environ.get(key) for key in PRELOAD_ENV}
    os.environ.update(PRELOAD_ENV)
    try:
        for name in names:
            try:
                importlib.import_module(name)
            except Exception:  # not installed or broken here: a worker that needs it imports it (and fails) itself
                pass
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
        _shut_nvml_down()
    return fork_problem(threads)


def _shut_nvml_down():
    """Undo every nvmlInit of this process (NVML counts them), so NVML's threads end."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:  # no NVIDIA driver here: nothing was started
        return
    for _ in range(64):
        if nvml.nvmlShutdown() != 0:  # NVML_ERROR_UNINITIALIZED: the last one is undone
            return


def _os_threads():
    return len(os.listdir("/proc/self/task"))


def fork_problem(threads_before):
    """Why a fork of this process would not be a sound worker (None: it would): threads the
    preload left running (a fork copies only the thread that forks, and a lock another one held
    stays held in the child), or a forked child that cannot use the GPU."""
    if _os_threads() > threads_before:
        return f"the preload left threads running ({_os_threads()} in the process, {threads_before} after torch)"
    import torch

    in_bad_fork = getattr(torch._C, "_cuda_isInBadFork", None)
    if in_bad_fork is None or not os.path.exists("/dev/nvidiactl"):  # no CUDA build or no GPU: nothing to prove
        return None
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(1 if in_bad_fork() else 0 if torch._C._cuda_getDeviceCount() > 0 else 2)
        except BaseException:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return {0: None, 1: "the preload started CUDA, which a forked worker cannot use"}.get(
        code, f"a process forked after the preload saw no GPU (exit {code})")


def main():
    judge, sock_fd = int(sys.argv[1]), int(sys.argv[2])
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))  # the judge blocks
    # them (harness/interrupts.py) and a child inherits that; its workers are forked from here
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != judge:
        os._exit(0)
    _prctl(PR_SET_DUMPABLE, 0)
    sock = socket.socket(fileno=sock_fd)
    problem = preload(sys.argv[3:])
    if problem:  # the judge starts its workers with Popen instead, and says why
        sock.send(json.dumps({"ready": False, "error": problem}).encode())
        os._exit(0)
    # what the preload made lives as long as every worker: out of the collector's sight, so a
    # worker's full collections neither walk it nor copy its pages (Python's gc.freeze docs)
    gc.freeze()
    request, fds = serve(judge, sock)
    become_worker(judge, request, fds)


if __name__ == "__main__":
    main()
