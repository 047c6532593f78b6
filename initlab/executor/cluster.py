"""The Dask bridge: run cells on a Dask distributed cluster (``tcp://host:8786``) or an in-process
``LocalCluster`` (``local:N``); progress events travel over a Dask topic. The run folder must be on a filesystem
every Dask worker sees under the same path (docs/cluster.md).

A scheduler address is checked to answer (:func:`probe_scheduler`) before a run makes its folder: within
:data:`SCHEDULER_TIMEOUT` seconds, a Dask scheduler must accept a TCP connection, complete Dask's handshake and have
at least one worker; otherwise one line says what answered instead (nothing: connection refused; a server that does
not speak Dask's protocol: the dashboard's HTTP port, 8787 by default, is not the scheduler's, 8786 by default; a
scheduler without workers, on which Dask would hold every cell forever)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import socket
import time
import uuid
from typing import Any, Sequence

from initlab.executor.core import (Cell, ExecutionReport, Progress, SweepBar, dependency_order, execute_cell, take_result,
                                   sigint_ignored_in_children, worker_setup)

__all__ = ["run_dask", "probe_scheduler", "SchedulerUnreachableError", "NoWorkersError", "SCHEDULER_TIMEOUT"]

#: seconds within which a Dask scheduler must answer (TCP connection and Dask's handshake) before a run starts
SCHEDULER_TIMEOUT = 10.0


class SchedulerUnreachableError(ValueError):
    """No Dask scheduler answered at the ``--scheduler`` address (one line: the address and what answered)."""


class NoWorkersError(SchedulerUnreachableError):
    """A Dask scheduler answered at the ``--scheduler`` address but no worker joined it within the timeout."""


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``tcp://host:port`` or ``host:port`` address, None for other schemes."""
    rest = address.split("://", 1)[1] if "://" in address else address
    if "://" in address and not address.startswith("tcp://"):
        return None
    host, _, port = rest.rpartition(":")
    host = host.strip("[]")
    try:
        return host, int(port.split("/")[0])
    except ValueError:
        return None


async def _handshake(address: str, timeout: float) -> None:
    from distributed.comm import connect

    comm = await asyncio.wait_for(connect(address, timeout=timeout), timeout)  # the read of the handshake has no
    await comm.close()                                                        # timeout of its own: wait_for bounds it


async def _await_a_worker(address: str, timeout: float) -> int:
    """The scheduler's worker count, asked every 0.2 s until it is at least 1 or ``timeout`` seconds have passed."""
    from distributed.core import rpc

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    scheduler = rpc(address, timeout=timeout)
    try:
        while True:
            left = max(deadline - loop.time(), 0.0)
            ident = await asyncio.wait_for(scheduler.identity(n_workers=1), max(left, 0.5))
            n = int(ident.get("n_workers", len(ident.get("workers", {}))))
            if n > 0 or loop.time() >= deadline:
                return n
            await asyncio.sleep(min(0.2, max(deadline - loop.time(), 0.0)))
    finally:
        await scheduler.close_rpc()


def probe_scheduler(address: str | None, timeout: float | None = None) -> None:
    """Check that a Dask scheduler answers at ``address`` and has a worker, within ``timeout`` seconds (default
    :data:`SCHEDULER_TIMEOUT`) for each; ``None`` and ``local:N`` (an in-process cluster) pass. Contacts the
    address, writes nothing.

    Raises:
        NoWorkersError: the scheduler answered but no worker joined it within the timeout (Dask would hold every cell
            with no error: ``dask/distributed`` reports nothing for a task waiting on workers).
        SchedulerUnreachableError: ``"--scheduler ADDRESS: no Dask scheduler answered at ADDRESS ..."`` with what was
            found: the connection refused (nothing listens there), no answer within the timeout, an unknown host, or a
            server that accepted the connection but did not complete Dask's handshake (an HTTP port such as the
            dashboard's).
        ImportError: dask distributed is not installed (``pip install 'initlab[cluster]'``).
    """
    if address is None or address.startswith("local:"):
        return
    timeout = SCHEDULER_TIMEOUT if timeout is None else float(timeout)
    try:
        import distributed  # noqa: F401
    except ImportError as err:
        raise ImportError(f"--scheduler {address}: needs dask distributed; install it with "
                          "pip install 'initlab[cluster]' (or pip install 'dask[distributed]')") from err
    head = f"--scheduler {address}: no Dask scheduler answered at {address}"
    hp = _host_port(address)
    if hp is not None:  # the TCP connection first: a refused or unknown address is said at once
        try:
            with socket.create_connection(hp, timeout=timeout):
                pass
        except ConnectionRefusedError:
            raise SchedulerUnreachableError(f"{head} (connection refused: nothing listens on port {hp[1]}; a Dask "
                                            "scheduler listens on 8786 by default)") from None
        except socket.gaierror as err:
            raise SchedulerUnreachableError(f"{head} (unknown host {hp[0]!r}: {err.strerror})") from None
        except (TimeoutError, socket.timeout):
            raise SchedulerUnreachableError(f"{head} within {timeout:g} s (no answer to the TCP connection: a "
                                            "firewall, or a host that is down)") from None
        except OSError as err:
            raise SchedulerUnreachableError(f"{head} ({err.strerror or err})") from None
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # a fresh event loop, whatever runs in this thread
        try:
            pool.submit(asyncio.run, _handshake(address, timeout)).result()
        except (asyncio.TimeoutError, OSError, ValueError) as err:
            raise SchedulerUnreachableError(
                f"{head} within {timeout:g} s (a server accepted the connection but did not complete Dask's handshake: "
                "the dashboard port, 8787 by default, is not the scheduler's, 8786 by default; "
                f"{type(err).__name__})") from None
        try:
            n = pool.submit(asyncio.run, _await_a_worker(address, timeout)).result()
        except (asyncio.TimeoutError, OSError, ValueError) as err:
            raise SchedulerUnreachableError(f"{head}: it completed Dask's handshake but did not say how many workers it "
                                            f"has within {timeout:g} s ({type(err).__name__})") from None
    if n < 1:
        raise NoWorkersError(f"--scheduler {address}: the Dask scheduler at {address} has no workers (none joined "
                             f"within {timeout:g} s), so no cell could run; start workers with 'dask worker {address}' "
                             "(docs/cluster.md), then run again")


def _dask_execute(root, name, fn, args, key, topic) -> dict[str, Any]:
    worker_setup()
    return execute_cell(root, name, fn, args, key, Progress(name, ("dask", topic)))


def _dask_client(scheduler: str):
    try:
        import distributed
    except ImportError as err:
        raise ImportError(f"--scheduler {scheduler}: needs dask distributed; install it with "
                          "pip install 'initlab[cluster]' (or pip install 'dask[distributed]')") from err
    import logging

    if scheduler.startswith("local:"):
        n = int(scheduler.split(":", 1)[1])
        with sigint_ignored_in_children():
            cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                               dashboard_address=None, silence_logs=logging.ERROR)
        return distributed.Client(cluster), cluster
    probe_scheduler(scheduler)  # one line within SCHEDULER_TIMEOUT, never a hang on a port that is not Dask's
    return distributed.Client(scheduler, timeout=f"{SCHEDULER_TIMEOUT:g}s"), None


def _slots(info: dict[str, Any], n_workers: int) -> int:
    """How many cells Dask is handed at once: its workers' threads (a worker without a count: one), at least one.
    Handing it every ready cell would let Dask's own order, not the plan's, decide what runs next (a later seed's
    backbone before this seed's training)."""
    threads = sum(int(w.get("nthreads", 1) or 1) for w in info.get("workers", {}).values())
    return max(1, threads or n_workers)


def run_dask(root: str, todo: Sequence[Cell], scheduler: str, bar: SweepBar, rep: ExecutionReport, on_error: str) -> None:
    client, cluster = _dask_client(scheduler)
    events: queue.Queue = queue.Queue()
    topic = f"initlab-progress-{uuid.uuid4().hex}"
    client.subscribe_topic(topic, lambda ev: events.put(ev[1]))  # ev = (scheduler timestamp, message)
    by_name = {c.name: c for c in todo}
    pending = list(dependency_order(todo))
    running: dict[Any, Cell] = {}
    ended: set[str] = set()
    lost: set[str] = set()

    def drain() -> None:
        while True:
            try:
                ev = events.get_nowait()
            except queue.Empty:
                return
            with contextlib.suppress(Exception):
                bar.event(*ev)

    try:
        info = client.scheduler_info(n_workers=-1)
        rep.workers = max(1, int(info.get("n_workers", len(info.get("workers", {})))))
        bar.workers = rep.workers
        slots = _slots(info, rep.workers)
        checked, empty_since = time.monotonic(), None
        while pending or running:
            for c in list(pending):  # in plan order, one cell per free worker thread (as the local pool does)
                if c.name in lost:
                    pending.remove(c)
                elif len(running) < slots and all(n in ended or n not in by_name for n in c.needs):
                    fut = client.submit(_dask_execute, root, c.name, c.target, dict(c.call_args(root)), c.key, topic, pure=False,
                                        key=f"initlab-{c.name}-{uuid.uuid4().hex[:8]}")
                    running[fut] = c
                    pending.remove(c)
            if not running:
                break
            time.sleep(0.2)
            drain()
            for fut in [f for f in running if f.done()]:
                c = running.pop(fut)
                lost |= take_result(fut, rep, bar, todo, c, on_error, ended)  # an error, or a worker lost too often (KilledWorker)
            bar.refresh()
            now = time.monotonic()
            if running and now - checked >= 1.0:  # Dask holds a cell without a word while no worker is left
                checked = now
                info = client.scheduler_info(n_workers=-1)  # a count, and the workers' threads
                n = int(info.get("n_workers", len(info.get("workers", {}))))
                slots = _slots(info, n)
                empty_since = None if n > 0 else (empty_since or now)
                if empty_since is not None and now - empty_since > SCHEDULER_TIMEOUT:
                    raise NoWorkersError(
                        f"--scheduler {scheduler}: every worker of the Dask scheduler at {scheduler} left and none joined "
                        f"within {SCHEDULER_TIMEOUT:g} s; {len(running) + len(pending)} cell(s) unfinished (finished "
                        "cells are kept: start workers, then rerun the same command to resume)")
    except BaseException:
        bar.close()
        with contextlib.suppress(BaseException):
            client.cancel(list(running), force=True)
        raise
    finally:
        with contextlib.suppress(BaseException):
            client.unsubscribe_topic(topic)
        with contextlib.suppress(BaseException):
            client.close()
        if cluster is not None:
            with contextlib.suppress(BaseException):
                cluster.close()
