"""One `orchestrator dev` process tree on a data folder, started, SIGKILLed whole and stopped (the dev-restart
crash tests and `bench.kill_tree`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).parent / "orchestrator")
START_SECONDS = 90.0


class Dev:
    """One `orchestrator dev` process tree on a data folder, its output in a log file."""

    def __init__(self, data_dir: Path, port: int, log_path: Path, app: str = "tests.crash.dev_app") -> None:
        self.data_dir, self.port, self.log_path = data_dir, port, log_path
        env = {
            **os.environ,
            "ORCHESTRATOR_LIMITS__ACTIVATION_DELAY_SECONDS": "0",
            "ORCHESTRATOR_LIMITS__LISTENER_FIRES_PER_MINUTE": "100000",
            "PYTHONUNBUFFERED": "1",
        }
        with log_path.open("ab") as out:
            self.process = subprocess.Popen(
                [CLI, "dev", "--app", app, "--data-dir", str(data_dir), "--http-port", str(port)],
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def ready(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"dev exited with {self.process.returncode}:\n{self.output()}")
            if "Ready." in self.output():
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"dev not ready within {START_SECONDS:.0f} s:\n{self.output()}")

    def tree(self) -> list[psutil.Process]:
        """Every process of this platform: the CLI's descendants and the detached postmaster."""
        found = [psutil.Process(self.process.pid)]
        found += found[0].children(recursive=True)
        pid_file = self.data_dir / "postgres" / "postmaster.pid"
        with contextlib.suppress(OSError, ValueError, psutil.Error):
            postmaster = psutil.Process(int(pid_file.read_text().split()[0]))
            found += [postmaster, *postmaster.children(recursive=True)]
        return found

    def kill(self) -> None:
        """SIGKILL the whole tree at once: no process gets to clean anything up."""
        for process in self.tree():
            with contextlib.suppress(psutil.Error):
                process.send_signal(signal.SIGKILL)
        self.process.wait()

    async def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(asyncio.to_thread(self.process.wait), 60)
            except TimeoutError:
                self.kill()
