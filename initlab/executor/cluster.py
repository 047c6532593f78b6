"""The Dask bridge: run cells on a Dask distributed cluster (``tcp://host:8786``) or an in-process
``LocalCluster`` (``local:N``); progress events travel over a Dask topic. The run folder must be on a filesystem
every Dask worker sees under the same path (docs/cluster.md)."""

from __future__ import annotations

import contextlib
import queue
import time
import uuid
from typing import Any, Sequence

from initlab.executor.core import (Cell, ExecutionReport, Progress, _Bar, _dependency_order, _execute, _take,
                                   sigint_ignored_in_children, worker_setup)

__all__ = ["run_dask"]


def _dask_execute(root, name, fn, args, key, topic) -> dict[str, Any]:
    worker_setup()
    return _execute(root, name, fn, args, key, Progress(name, ("dask", topic)))


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
    return distributed.Client(scheduler, timeout="30s"), None


def run_dask(root: str, todo: Sequence[Cell], scheduler: str, bar: _Bar, rep: ExecutionReport, on_error: str) -> None:
    client, cluster = _dask_client(scheduler)
    events: queue.Queue = queue.Queue()
    topic = f"initlab-progress-{uuid.uuid4().hex}"
    client.subscribe_topic(topic, lambda ev: events.put(ev[1]))  # ev = (scheduler timestamp, message)
    by_name = {c.name: c for c in todo}
    pending = list(_dependency_order(todo))
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
        rep.workers = max(1, len(client.scheduler_info().get("workers", {})))
        bar.workers = rep.workers
        while pending or running:
            for c in list(pending):
                if c.name in lost:
                    pending.remove(c)
                elif all(n in ended or n not in by_name for n in c.needs):
                    fut = client.submit(_dask_execute, root, c.name, c.target, dict(c.args), c.key, topic, pure=False,
                                        key=f"initlab-{c.name}-{uuid.uuid4().hex[:8]}")
                    running[fut] = c
                    pending.remove(c)
            if not running:
                break
            time.sleep(0.2)
            drain()
            for fut in [f for f in running if f.done()]:
                c = running.pop(fut)
                lost |= _take(fut, rep, bar, todo, c, on_error, ended)  # an error, or a worker lost too often (KilledWorker)
            bar.refresh()
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
