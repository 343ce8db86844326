"""``relaygraph calibrate``: measure this machine's numpy executor and store the ``cpu`` profile."""

from __future__ import annotations

import argparse

__all__ = ["register"]


def _describe(profile) -> str:
    """A short account of a profile: what it is valid for and its main figures."""
    from ..egraph.calibrate import probe_spread
    from ..egraph.cpu_cost import CpuCost, curve_at

    model = CpuCost(profile)
    key = "; ".join(f"{k} {v}" for k, v in profile.key.items())
    add = curve_at(profile.curve("add"), 1 << 20)
    rows = [
        ("profile", f"{profile.path}{' (quick)' if profile.quick else ''}"),
        ("valid for", key),
        ("steadiness", f"the probe's passes during calibration within {probe_spread(profile.data):.2f}x "
                       "of each other"),
        ("dispatch", f"{profile.dispatch * 1e6:.2f} us per instruction, {profile.program * 1e6:.1f} us "
                     "per program"),
        ("GEMM 512x512x512", f"{2 * 512 ** 3 / model.gemm_time(512, 512, 512) / 1e9:.1f} GFLOP/s"),
        ("add on 1M floats", f"{add * 1e3:.3f} ms ({12 * (1 << 20) / add / 1e9:.1f} GB/s)"),
        ("conv2d 64x56x56, 3x3",
         f"{model.conv_time((1, 64, 56, 56), 64, 64, 3, 3, 64 * 56 * 56, (1, 1)) * 1e3:.2f} ms"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from ..egraph.calibrate import calibrate
    from ..egraph.cpu_cost import load_profile, profile_path

    if args.check:
        profile = load_profile(args.profile)
        print(_describe(profile))
        print("the profile matches this machine and build")
        return 0
    # a CalibrationWarning (the machine's speed changed) is printed by the command line's main
    profile = calibrate(quick=args.quick, path=profile_path(args.profile), progress="auto")
    print(f"calibrated in {profile.data['seconds']:.1f} s")
    print(_describe(profile))
    return 0


def register(sub) -> None:
    """Add ``calibrate``."""
    p = sub.add_parser("calibrate", help="measure this machine's numpy executor for the cpu cost model")
    p.add_argument("--quick", action="store_true",
                   help="a coarse calibration in a few seconds (the full one takes 90-110 seconds)")
    p.add_argument("--profile", metavar="FILE",
                   help="where the profile goes (default: $RELAYGRAPH_PROFILE_DIR or the cache "
                        "directory, cpu-profile-blasB-numexprN.json for B BLAS and N numexpr threads)")
    p.add_argument("--check", action="store_true",
                   help="measure nothing: check that the stored profile matches this machine and show it")
    p.set_defaults(run=_cmd_calibrate)
