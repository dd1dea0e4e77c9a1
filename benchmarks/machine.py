"""Register this machine with asv under a name that includes its device.

    python -m benchmarks.machine            # runs `asv machine --yes ...`
    python -m benchmarks.machine --name     # just print the machine name
    python -m benchmarks.machine --dry-run  # print the asv command

asv keys result histories by machine name, so the name is
``<hostname>-<device>`` (``vm-cpu``, ``node7-nvidia-a100-sxm4-40gb``):
runs on different accelerators never land in the same history.  The
``cpu`` field records the CPU model, the accelerator JAX sees and the
jax/jaxlib versions, and asv stores it in every result file, so each data
point says what it was measured on.
"""

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys


def cpu_model():
    """CPU model string from /proc/cpuinfo (Linux) or platform as fallback."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def accelerator():
    """(kind, description) of the device JAX uses by default."""
    import jax

    dev = jax.devices()[0]
    if dev.platform == "cpu":
        return "cpu", f"cpu ({cpu_model()})"
    kinds = sorted({d.device_kind for d in jax.devices()})
    count = len(jax.devices())
    return dev.platform, f"{count}x {' + '.join(kinds)} ({dev.platform})"


def slug(text):
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def machine_info():
    import jax
    import jaxlib

    kind, desc = accelerator()
    host = platform.node() or "unknown"
    if kind == "cpu":
        name = f"{host}-cpu"
    else:
        import jax as _jax

        name = f"{host}-{slug(_jax.devices()[0].device_kind)}"
    ram = ""
    try:
        ram = str(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        pass
    return {
        "machine": name,
        "os": f"{platform.system()} {platform.release()}",
        "arch": f"{platform.machine()} {kind}",
        "cpu": (
            f"{cpu_model()} ({os.cpu_count()} cores); device: {desc}; "
            f"jax {jax.__version__}, jaxlib {jaxlib.__version__}"
        ),
        "num_cpu": str(os.cpu_count()),
        "ram": ram,
    }


def asv_command(info, config=None):
    asv = shutil.which("asv") or os.path.join(os.path.dirname(sys.executable), "asv")
    cmd = [asv, "machine", "--yes"]
    for key in ("machine", "os", "arch", "cpu", "num_cpu", "ram"):
        if info[key]:
            cmd += [f"--{key}", info[key]]
    if config:
        cmd += ["--config", config]
    return cmd


def _complete_entry(info):
    """Store every field, not only those differing from asv's defaults.

    ``asv machine`` saves just the fields that differ from what it detects
    itself (os, ram, num_cpu usually don't), and ``asv run`` then records
    only the stored fields with each result.  Fill them in via asv's API.
    """
    try:
        from asv.machine import MachineCollection
    except ImportError:
        return
    entry = dict(info)
    entry.update({k: v for k, v in MachineCollection.load(info["machine"]).items() if v})
    MachineCollection.save(info["machine"], entry)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", action="store_true", help="print the machine name only")
    parser.add_argument("--dry-run", action="store_true", help="print the asv command")
    parser.add_argument("--config", default=None, help="asv.conf.json path")
    args = parser.parse_args(argv)
    info = machine_info()
    if args.name:
        print(info["machine"])
        return 0
    cmd = asv_command(info, args.config)
    if args.dry_run:
        print(subprocess.list2cmdline(cmd))
        return 0
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    _complete_entry(info)
    print(info["machine"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
