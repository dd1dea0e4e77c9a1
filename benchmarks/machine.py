"""This machine as asv knows it: a stable description, and what changes under it.

    python -m benchmarks.machine            # register (or reuse) this machine with asv
    python -m benchmarks.machine --name     # just print the machine name
    python -m benchmarks.machine --show     # the description and the environment, as JSON

asv files every result under a machine name and copies the machine's
description into each result's parameters, which are the keys of its
series.  So the description holds only what identifies the hardware and
stays put: the name ``<hostname>-<device>`` (``vm-cpu``,
``node7-nvidia-a100-sxm4-40gb``; runs on different accelerators never share
a series), the OS family (``Linux``, no kernel version), the architecture and
device kind, the CPU model and core count, the device JAX uses, and the RAM
in GiB.  What changes under a machine -- kernel patch level, the Python
executable (venv path), jax/jaxlib/numpy versions, the device list -- is
*environment information*: ``benchmarks.history`` records it per result in
``environments.jsonl`` beside the results (asv reads only ``*.json``), and the
plots mark where it changed.

A machine description, once recorded (``<results_dir>/<name>/machine.json``,
kept in git), is never overwritten: registering again reuses it, and says
so if what is detected now differs.
"""

import argparse
import json
import os
import platform
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIELDS = ("machine", "os", "arch", "cpu", "num_cpu", "ram")


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
    return dev.platform, f"{len(jax.devices())}x {' + '.join(kinds)} ({dev.platform})"


def slug(text):
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def ram_gib():
    try:
        return f"{round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)} GiB"
    except (ValueError, OSError, AttributeError):
        return ""


def machine_info():
    """The stable description (asv's machine fields)."""
    import jax

    kind, desc = accelerator()
    host = platform.node() or "unknown"
    device = "cpu" if kind == "cpu" else slug(jax.devices()[0].device_kind)
    return {
        "machine": f"{host}-{device}",
        "os": platform.system(),
        "arch": f"{platform.machine()} {kind}",
        "cpu": f"{cpu_model()} ({os.cpu_count()} cores); device: {desc}",
        "num_cpu": str(os.cpu_count()),
        "ram": ram_gib(),
        "version": 1,
    }


def environment_info():
    """What may change under a machine: recorded per result, never a series key."""
    import jax
    import jaxlib
    import numpy

    return {
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "kernel": platform.release(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "numpy": numpy.__version__,
        "devices": [f"{d.platform}:{d.device_kind}" for d in jax.devices()],
    }


def results_dir(config=None):
    from asv.util import load_json

    path = config or os.path.join(ROOT, "asv.conf.json")
    conf = load_json(path, js_comments=True)
    return os.path.join(os.path.dirname(os.path.abspath(path)), conf["results_dir"])


def recorded_description(name, config=None):
    """The machine.json kept with the results, or None."""
    path = os.path.join(results_dir(config), name, "machine.json")
    try:
        with open(path) as fh:
            return json.load(fh)
    except OSError:
        return None


def ensure_registered(name=None, config=None):
    """Make asv know machine ``name`` (default: this one) and return its description.

    The description recorded with the results wins, then the one asv already
    has in ``~/.asv-machine.json``; only a machine known to neither is
    described from what is detected now.  Neither is ever overwritten with
    something else.
    """
    from asv.machine import MachineCollection
    from asv.util import UserError

    detected = machine_info()
    name = name or detected["machine"]
    detected["machine"] = name
    try:
        known = MachineCollection.load(name)
    except UserError:
        known = None
    recorded = recorded_description(name, config)
    description = recorded or known or detected
    if known != description:  # asv copies this entry into every result
        MachineCollection.save(name, description)
    differs = {k: (description.get(k), detected[k]) for k in FIELDS
               if k != "machine" and str(description.get(k)) != str(detected[k])}
    if differs:
        print(f"machine {name}: keeping the recorded description; detected now differs in "
              + ", ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in differs.items())
              + " (pass --machine NEW-NAME to start a separate series)", file=sys.stderr)
    return description


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", action="store_true", help="print the machine name only")
    parser.add_argument("--show", action="store_true",
                        help="print the detected description and environment as JSON")
    parser.add_argument("--machine", default=None, help="register under this name instead")
    parser.add_argument("--config", default=None, help="asv.conf.json path")
    args = parser.parse_args(argv)
    if args.name:
        print(args.machine or machine_info()["machine"])
        return 0
    if args.show:
        print(json.dumps({"machine": machine_info(), "environment": environment_info()},
                         indent=2))
        return 0
    description = ensure_registered(args.machine, args.config)
    print(json.dumps(description, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
