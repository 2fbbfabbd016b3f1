"""`gpuready bench --data`: can the input pipeline feed the GPUs? Two measurements, each judged against the rate
the GPUs consume (given by the caller: tokens/s ÷ sequence length, or images/s; bytes/s for storage):

- `dataloader_throughput`: a torch DataLoader over a CPU-heavy synthetic dataset, samples/s per worker count
  (and pinned vs not pinned where CUDA is available) → finding `bench.dataloader_bottleneck`;
- `storage_throughput`: sequential and random reads of the files under a folder (fio when on PATH, else a built-in
  reader that avoids the page cache) → finding `bench.storage_slow`.

Both are pure in the sense of the verbs: they return (measurements, findings) and change nothing on the machine
(storage reads only; fio runs with `--readonly`).
"""

from __future__ import annotations

import json
import mmap
import os
import random
import shutil
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

from gpuready.evidence.folders import walk_folder
from gpuready.i18n import Said, finding_text, said
from gpuready.model import Finding, Measurement, Status, Subject

BATCH_SIZE = 32
IMAGE_SOURCE_HW = 256
"""The synthetic 'decoded' image is 3 × 256 × 256 uint8; the random crop is 224 × 224."""
IMAGE_CROP_HW = 224
BLUR_ROUNDS = 2
"""Rounds of a 3×3 box blur per sample: a fixed amount of extra CPU work standing in for heavier augmentation."""
_MEAN = (0.485, 0.456, 0.406)
_STD = (0.229, 0.224, 0.225)
PER_SAMPLE_WORK = (f"generate a 3x{IMAGE_SOURCE_HW}x{IMAGE_SOURCE_HW} uint8 image from a generator seeded with the "
                   f"index (decode stand-in), random {IMAGE_CROP_HW}x{IMAGE_CROP_HW} crop, random horizontal flip, "
                   f"uint8 -> float32 /255, per-channel ImageNet normalisation, {BLUR_ROUNDS} rounds of a 3x3 box "
                   f"blur (augmentation stand-in)")

DATALOADER_REFS = ["https://pytorch.org/docs/stable/data.html (DataLoader: num_workers, pin_memory, "
                   "persistent_workers)"]
STORAGE_REFS = ["https://fio.readthedocs.io/en/latest/fio_doc.html (sequential and random read jobs, --readonly)"]

SEQUENTIAL_BLOCK = 1 << 20
RANDOM_BLOCKS = tuple(1 << shift for shift in range(12, 21))
"""Random reads: block sizes 4 KiB, 8 KiB, ... 1 MiB, chosen uniformly; offsets aligned to 4 KiB."""
_ALIGN = 4096


# ------------------------------------------------------------------------------------------------ data loader

def _synthetic_dataset(samples: int) -> Any:
    import torch
    from torch.utils.data import Dataset

    class SyntheticImages(Dataset):
        """Map-style data set whose every item costs a fixed amount of CPU work (see PER_SAMPLE_WORK)."""

        def __init__(self, length: int):
            self.length = length
            self.mean = torch.tensor(_MEAN).view(3, 1, 1)
            self.std = torch.tensor(_STD).view(3, 1, 1)

        def __len__(self) -> int:
            return self.length

        def __getitem__(self, index: int) -> tuple[Any, int]:
            gen = torch.Generator().manual_seed(index)
            image = torch.randint(0, 256, (3, IMAGE_SOURCE_HW, IMAGE_SOURCE_HW), dtype=torch.uint8, generator=gen)
            room = IMAGE_SOURCE_HW - IMAGE_CROP_HW
            top, left = (int(v) for v in torch.randint(0, room + 1, (2,), generator=gen))
            image = image[:, top:top + IMAGE_CROP_HW, left:left + IMAGE_CROP_HW]
            if bool(torch.rand((), generator=gen) < 0.5):
                image = image.flip(-1)
            tensor = image.to(torch.float32).div_(255.0).sub_(self.mean).div_(self.std)
            for _ in range(BLUR_ROUNDS):
                tensor = torch.nn.functional.avg_pool2d(tensor.unsqueeze(0), 3, stride=1, padding=1).squeeze(0)
            return tensor.contiguous(), index % 1000

    return SyntheticImages(samples)


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _time_loader(dataset: Any, workers: int, pin: bool) -> tuple[float, int, float]:
    """(samples/s, samples timed, seconds): one batch of warm-up (worker start included), then the rest timed.

    With 0 workers the main process loads the data with one intra-op thread, as DataLoader workers do
    (torch.set_num_threads(1) in each worker), so every count does the same work per sample; restored afterwards."""
    import torch
    from torch.utils.data import DataLoader

    threads = torch.get_num_threads()
    if workers == 0:
        torch.set_num_threads(1)

    loader = DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=False, num_workers=workers, pin_memory=pin,
                        drop_last=False, persistent_workers=False)
    iterator = iter(loader)
    try:
        next(iterator)
        timed = 0
        start = time.perf_counter()
        for images, _ in iterator:
            timed += int(images.shape[0])
        elapsed = time.perf_counter() - start
    finally:
        del iterator
        if workers == 0:
            torch.set_num_threads(threads)
    return (timed / elapsed if elapsed > 0 else 0.0), timed, elapsed


def dataloader_throughput(*, needed_samples_per_s: float | None, workers: tuple[int, ...] = (0, 1, 2, 4),
                          samples: int = 256, pin_memory: bool | None = None,
                          host: str) -> tuple[list[Measurement], list[Finding]]:
    """Samples/s of a DataLoader (batch 32) over a CPU-heavy synthetic data set for each worker count, judged
    against `needed_samples_per_s` (what the GPUs consume).

    Worker counts above twice the CPUs this process may run on (sched_getaffinity) are skipped. `pin_memory`:
    None measures both unpinned and pinned where CUDA is available (unpinned only without CUDA, where pinning is
    not measurable); True/False measures only that setting (True only with CUDA). At least two batches are loaded
    per run: the first is warm-up (worker start-up included), the rest are timed.
    """
    import torch

    subject = Subject(host=host)
    cpus = _cpu_count()
    cuda = torch.cuda.is_available()
    samples = max(int(samples), 2 * BATCH_SIZE)
    counts = sorted({int(w) for w in workers if int(w) >= 0})
    measured_counts = [w for w in counts if w <= 2 * cpus]
    skipped_counts = [w for w in counts if w > 2 * cpus]
    if cuda:
        pins = [False, True] if pin_memory is None else [bool(pin_memory)]
        pin_note = None
    else:
        pins = [False]
        pin_note = "not measurable without CUDA (pinned host memory needs a CUDA device)"

    dataset = _synthetic_dataset(samples)
    versions = {"torch": str(torch.__version__)}
    measurements: list[Measurement] = []
    best: dict[int, float] = {}
    errors: list[Said] = []
    for count in measured_counts:
        for pin in pins:
            try:
                rate, timed, elapsed = _time_loader(dataset, count, pin)
            except Exception as exc:  # a worker that dies is one bad row, not a crash of the bench
                errors.append(said("bench.dataloader.worker_failed", count=count, error=f"{type(exc).__name__}: {exc}"))
                continue
            method = {"workers": count, "batch": BATCH_SIZE, "pin_memory": pin if pin_note is None else pin_note,
                      "samples": samples, "timed_samples": timed, "timed_s": round(elapsed, 4),
                      "warmup_batches": 1, "cpus": cpus, "per_sample_work": PER_SAMPLE_WORK}
            measurements.append(Measurement(name="dataloader_samples_per_s", subject=subject, value=rate,
                                            unit="samples_per_s", method=method, samples=[rate], versions=versions))
            best[count] = max(best.get(count, 0.0), rate)

    return measurements, [_judge_dataloader(subject, needed_samples_per_s, best, skipped_counts, cpus, errors)]


def _judge_dataloader(subject: Subject, needed: float | None, best: dict[int, float], skipped: list[int],
                      cpus: int, errors: list[Said]) -> Finding:
    check_id = "bench.dataloader_bottleneck"
    observed = {str(count): rate for count, rate in sorted(best.items())}
    skipped_note = said("bench.dataloader.skipped_counts", counts=", ".join(map(str, skipped)), cpus=cpus) \
        if skipped else None
    failed_note = said("bench.dataloader.failed", errors=errors) if errors else None
    notes = said("bench.dataloader.both", skipped=skipped_note, failed=failed_note) if skipped_note and failed_note \
        else skipped_note or failed_note or ""

    def finding(status: Status, text: Said, **kwargs: object) -> Finding:
        return Finding(check_id=check_id, status=status, subject=subject, **finding_text(text),
                       refs=list(DATALOADER_REFS), **kwargs)

    if needed is None:
        return finding(Status.SKIP, said("bench.dataloader.not_judged", notes=notes), observed=observed or None)
    if not best:
        return finding(Status.ERROR, said("bench.dataloader.none", notes=notes), expected=needed)
    keeping_up = [count for count in sorted(best) if best[count] >= needed]
    largest = max(best)
    if not keeping_up:
        return finding(Status.FAIL, said("bench.dataloader.slow", best=max(best.values()), needed=needed, notes=notes),
                       observed=observed, expected=needed)
    smallest = keeping_up[0]
    if smallest == largest and len(best) > 1:
        return finding(Status.WARN, said("bench.dataloader.largest_only", workers=largest, rate=best[largest],
                                         needed=needed, notes=notes), observed=observed, expected=needed)
    return finding(Status.PASS, said("bench.dataloader.keeps_up", workers=smallest, rate=best[smallest], needed=needed,
                                     notes=notes), observed=observed, expected=needed)


# ------------------------------------------------------------------------------------------------ storage

def _files_under(path: Path, max_bytes: int) -> tuple[list[tuple[str, int]], Said | None]:
    """(regular files with their sizes, bounded so the sum stays within max_bytes (the last one counted in part);
    why nothing could be listed, or None). Links are not followed."""
    files: list[tuple[str, int]] = []
    total = 0
    problems: list[str] = []
    if not path.is_dir():
        return [], said("bench.storage.not_a_folder", path=str(path))

    def onerror(exc: OSError, _relative: str) -> None:
        problems.append(str(exc))

    for item in walk_folder(path, files_first=True, on_error=onerror):  # in os.walk's order
        full = item.entry.path
        try:
            info = os.lstat(full)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode) or info.st_size == 0 or not os.access(full, os.R_OK):
            continue
        files.append((full, min(info.st_size, max_bytes - total)))
        total += files[-1][1]
        if total >= max_bytes:
            return files, None
    if not files and problems:
        return [], said("bench.storage.unreadable", path=str(path), problem=problems[0])
    return files, None


def _open_for_read(file: str) -> tuple[int, str]:
    """An fd and the method: O_DIRECT where the file system allows it, else a plain fd after
    posix_fadvise(DONTNEED) so the page cache (clean pages) does not answer."""
    if hasattr(os, "O_DIRECT"):
        try:
            return os.open(file, os.O_RDONLY | os.O_DIRECT), "O_DIRECT"
        except OSError:
            pass
    fd = os.open(file, os.O_RDONLY)
    if hasattr(os, "posix_fadvise"):
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            return fd, "buffered after posix_fadvise(DONTNEED)"
        except OSError:
            pass
    return fd, "buffered (page cache may answer)"


def _read_into(fd: int, buffer: mmap.mmap, size: int, offset: int, direct: bool) -> int:
    view = memoryview(buffer)[:size]
    try:
        return os.preadv(fd, [view], offset)
    except OSError:
        if not direct:
            raise
        return -1
    finally:
        view.release()


def _builtin_read(files: list[tuple[str, int]], random_mode: bool, deadline: float, budget: int,
                  seed: int = 0) -> tuple[int, float, set[str]]:
    """(bytes read, seconds, methods used). Buffers are page-aligned (mmap), as O_DIRECT needs."""
    buffer = mmap.mmap(-1, SEQUENTIAL_BLOCK)
    methods: set[str] = set()
    done = 0
    elapsed = 0.0
    rng = random.Random(seed)
    try:
        fds: list[tuple[int, str, int]] = []
        for file, size in files:
            try:
                fd, method = _open_for_read(file)
            except OSError:
                continue
            fds.append((fd, method, size))
        try:
            if not fds:
                return 0, 0.0, methods
            start = time.perf_counter()
            if not random_mode:
                for fd, method, size in fds:
                    offset = 0
                    while offset < size and time.perf_counter() < deadline:
                        got = _read_into(fd, buffer, SEQUENTIAL_BLOCK, offset, method == "O_DIRECT")
                        if got <= 0:
                            break
                        got = min(got, size - offset)
                        offset += got
                        done += got
                    methods.add(method)
            else:
                weights = [size for _, _, size in fds]
                while done < budget and time.perf_counter() < deadline:
                    fd, method, size = rng.choices(fds, weights=weights)[0]
                    block = rng.choice(RANDOM_BLOCKS)
                    last = max(0, (size - block) // _ALIGN)
                    offset = rng.randint(0, last) * _ALIGN
                    got = _read_into(fd, buffer, block, offset, method == "O_DIRECT")
                    if got < 0:
                        continue
                    if got == 0 and size > 0:
                        break
                    done += got
                    methods.add(method)
            elapsed = time.perf_counter() - start
        finally:
            for fd, _, _ in fds:
                os.close(fd)
    finally:
        buffer.close()
    return done, elapsed, methods


def _fio(files: list[tuple[str, int]], random_mode: bool, budget: int, runtime_s: float) -> tuple[int, float, str]:
    """(bytes read, seconds, method) from one fio job; raises on any problem (the caller falls back)."""
    names = [file for file, _ in files]
    if any(":" in name for name in names):
        raise ValueError("a file name holds ':' (fio's separator)")
    fio = shutil.which("fio")
    if not fio:
        raise FileNotFoundError("fio")
    last_error = ""
    for direct in (1, 0):
        command = [fio, "--name=gpuready-data", "--readonly", "--output-format=json", "--ioengine=psync",
                   f"--direct={direct}", f"--rw={'randread' if random_mode else 'read'}",
                   f"--filename={':'.join(names)}", f"--io_size={max(budget, _ALIGN)}",
                   f"--runtime={max(1, int(runtime_s))}", "--time_based=0", "--numjobs=1",
                   "--invalidate=1", "--group_reporting"]
        command += ["--bsrange=4k-1m", "--blockalign=4k"] if random_mode else ["--bs=1m"]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=runtime_s + 30, check=False)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"fio took longer than {runtime_s + 30:.0f} s") from None
        if result.returncode != 0:
            lines = (result.stderr or result.stdout).strip().splitlines()
            last_error = lines[-1] if lines else f"fio exited with {result.returncode}"
            continue
        text = result.stdout[result.stdout.find("{"):]
        job = json.loads(text)["jobs"][0]["read"]
        runtime_ms = float(job.get("runtime", 0))
        read_bytes = int(job.get("io_bytes", 0))
        if runtime_ms <= 0 or read_bytes <= 0:
            last_error = "fio read nothing"
            continue
        version = json.loads(text).get("fio version", "fio")
        return read_bytes, runtime_ms / 1000.0, f"{version} --direct={direct} --readonly (psync)"
    raise RuntimeError(last_error)


def storage_throughput(path: Path, *, needed_bytes_per_s: float | None, host: str, max_bytes: int = 1 << 30,
                       timeout_s: float = 60) -> tuple[list[Measurement], list[Finding]]:
    """Sequential (1 MiB blocks) and random (4 KiB–1 MiB blocks, 4 KiB-aligned offsets) read throughput of the
    regular files under `path` (links not followed; at most `max_bytes` of them, read at most once each way), within
    `timeout_s` split between the two passes. fio (`--readonly`, JSON output) where it is on PATH, else a built-in
    reader: O_DIRECT with page-aligned buffers where the file system allows it, else plain reads after
    posix_fadvise(DONTNEED). `method` says which was used. Judged against `needed_bytes_per_s`."""
    subject = Subject(host=host)
    check_id = "bench.storage_slow"
    path = Path(path)
    files, why_not = _files_under(path, max(int(max_bytes), 1))
    if not files:
        sentence = said("bench.storage.not_measured", why=why_not) if why_not \
            else said("bench.storage.no_files", path=str(path))
        return [], [Finding(check_id=check_id, status=Status.SKIP, subject=subject, **finding_text(sentence),
                            refs=list(STORAGE_REFS))]

    total = sum(size for _, size in files)
    half = max(float(timeout_s), 1.0) / 2
    measurements: list[Measurement] = []
    rates: dict[str, float] = {}
    notes: list[Said] = []
    for mode, name in (("sequential", "storage_sequential_read_bytes_per_s"),
                       ("random", "storage_random_read_bytes_per_s")):
        random_mode = mode == "random"
        method: dict[str, Any] = {"path": str(path), "files": len(files), "bytes_listed": total,
                                  "max_bytes": int(max_bytes),
                                  "blocks": "4 KiB-1 MiB, 4 KiB-aligned offsets" if random_mode else "1 MiB"}
        try:
            read_bytes, seconds, how = _fio(files, random_mode, total, half)
            method["tool"] = "fio"
        except Exception as exc:  # no fio, or fio refused: the built-in reader
            if shutil.which("fio"):
                notes.append(said("bench.storage.fio_failed", mode=said(f"bench.storage.{mode}"), error=str(exc)))
            read_bytes, seconds, used = _builtin_read(files, random_mode, time.perf_counter() + half, total)
            how = " + ".join(sorted(used)) or "none"
            method["tool"] = "built-in reader"
        method.update({"method": how, "bytes_read": read_bytes, "seconds": round(seconds, 4)})
        if read_bytes <= 0 or seconds <= 0:
            notes.append(said("bench.storage.read_nothing", mode=said(f"bench.storage.{mode}")))
            continue
        rate = read_bytes / seconds
        rates[mode] = rate
        measurements.append(Measurement(name=name, subject=subject, value=rate, unit="bytes_per_s",
                                        method=method, samples=[rate]))

    note = said("bench.storage.notes", notes=notes) if notes else ""
    observed = {mode: rate for mode, rate in rates.items()}
    if not rates:
        finding = Finding(check_id=check_id, status=Status.SKIP, subject=subject, refs=list(STORAGE_REFS),
                          **finding_text(said("bench.storage.nothing_read", path=str(path), notes=note)))
    elif needed_bytes_per_s is None:
        finding = Finding(check_id=check_id, status=Status.SKIP, subject=subject, observed=observed,
                          **finding_text(said("bench.storage.not_judged", notes=note)), refs=list(STORAGE_REFS))
    else:
        needed = float(needed_bytes_per_s)
        seq, rnd = rates.get("sequential"), rates.get("random")
        text = said("bench.storage.rates." + ("both" if len(rates) > 1 else next(iter(rates))),
                    **{mode: rate / 1e6 for mode, rate in rates.items()})
        if seq is not None and seq < needed:
            status, msg_id = Status.FAIL, "bench.storage.too_slow"
        elif rnd is not None and rnd < needed:
            status, msg_id = Status.WARN, "bench.storage.random_short"
        else:
            status, msg_id = Status.PASS, "bench.storage.keeps_up"
        finding = Finding(check_id=check_id, status=status, subject=subject, observed=observed, expected=needed,
                          **finding_text(said(msg_id, rates=text, needed=needed / 1e6, notes=note)),
                          refs=list(STORAGE_REFS))
    return measurements, [finding]
