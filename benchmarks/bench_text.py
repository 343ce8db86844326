"""Text format speed: lines per second parsing and printing, and whether the cost is linear.

A generated program of residual dense blocks (four lines per layer: dense, bias_add, relu, add
with the block's input) is parsed and printed at 2,000 and 20,000 layers. The baseline is the
small program, measured in the same process: the ratio of the per-line cost at 20,000 layers to
the per-line cost at 2,000 layers should be <= 1.2 (linear). Targets on the reference machine:
parse >= 30,000 lines/s, print >= 100,000 lines/s. Times are CPU time of this process (best of
five), so other load on the machine disturbs them less; wall-clock rates are shown as well.
Then a 100,000-deep chain of graph bindings and one of lets are parsed and printed.
"""

from __future__ import annotations

import sys
import time

sys.path.insert(0, __import__("os").path.dirname(__file__) + "/..")

import relaygraph as rg  # noqa: E402

HEADER = '#[version = "0.0.5"]\n'
WEIGHTS = 8


def program(layers: int) -> str:
    """The canonical text of a ``layers``-block residual MLP (as the printer writes it)."""
    params = ", ".join(["%x: Tensor[(1, 64), float32]"]
                       + [f"%w{i}: Tensor[(64, 64), float32]" for i in range(WEIGHTS)]
                       + [f"%b{i}: Tensor[(64), float32]" for i in range(WEIGHTS)])
    lines = [f"def @main({params}) {{"]
    prev = "%x"
    for i in range(layers):
        k, n = i % WEIGHTS, 4 * i
        lines.append(f"  %{n} = nn.dense({prev}, %w{k}, units=64);")
        lines.append(f"  %{n + 1} = nn.bias_add(%{n}, %b{k});")
        lines.append(f"  %{n + 2} = nn.relu(%{n + 1});")
        last = i == layers - 1
        lines.append(f"  add(%{n + 2}, {prev})" if last else f"  %{n + 3} = add(%{n + 2}, {prev});")
        prev = f"%{n + 3}"
    lines.append("}")
    return HEADER + "\n".join(lines) + "\n"


def best_of(fn, repeat: int = 5) -> tuple[float, float, object]:
    """(CPU seconds, wall seconds, result) of the fastest of ``repeat`` runs."""
    best = (float("inf"), float("inf"), None)
    for _ in range(repeat):
        cpu, wall = time.process_time(), time.perf_counter()
        result = fn()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        if cpu < best[0]:
            best = (cpu, wall, result)
    return best


def measure(layers: int) -> dict:
    text = program(layers)
    lines = text.count("\n")
    parse_cpu, parse_wall, mod = best_of(lambda: rg.parse(text))
    print_cpu, print_wall, out = best_of(lambda: rg.astext(mod))
    assert out == text, "the generated program is not in canonical form"
    return {"layers": layers, "lines": lines, "parse_cpu": parse_cpu, "parse_wall": parse_wall,
            "print_cpu": print_cpu, "print_wall": print_wall}


def deep_chains(n: int = 100_000) -> None:
    graph = HEADER + "def @main(%x: float32) {\n" + "".join(
        f"  %{i} = negative(%{i - 1 if i else 'x'});\n" for i in range(n)) + f"  negative(%{n - 1})\n}}\n"
    lets = HEADER + "def @main(%x: float32) {\n" + "".join(
        f"  let %v{i} = negative(%{'v' + str(i - 1) if i else 'x'});\n" for i in range(n)) + \
        f"  %v{n - 1}\n}}\n"
    for name, text in (("graph bindings", graph), ("nested lets", lets)):
        start = time.perf_counter()
        mod = rg.parse(text)
        parsed = time.perf_counter()
        ok = rg.astext(mod) == text
        done = time.perf_counter()
        print(f"  {n:,}-deep {name:15s} parse {parsed - start:5.2f} s   print {done - parsed:5.2f} s"
              f"   round trip {'identical' if ok else 'DIFFERENT'}")


def main() -> None:
    rg.parse(program(10))  # compile the grammar and load the op table outside the timings
    small, large = measure(2_000), measure(20_000)
    print("Relay text format: generated residual MLP, 4 lines per layer (CPU time, best of 5)")
    print(f"  {'layers':>7} {'lines':>7}   {'parse lines/s':>14} {'(wall)':>9}   "
          f"{'print lines/s':>14} {'(wall)':>9}")
    for r in (small, large):
        print(f"  {r['layers']:>7,} {r['lines']:>7,}   {r['lines'] / r['parse_cpu']:>14,.0f} "
              f"{r['lines'] / r['parse_wall']:>9,.0f}   {r['lines'] / r['print_cpu']:>14,.0f} "
              f"{r['lines'] / r['print_wall']:>9,.0f}")
    for kind, target in (("parse", 30_000), ("print", 100_000)):
        per_small = small[f"{kind}_cpu"] / small["lines"]
        per_large = large[f"{kind}_cpu"] / large["lines"]
        rate = large["lines"] / large[f"{kind}_cpu"]
        print(f"  {kind}: per-line cost at 20,000 layers / at 2,000 layers = "
              f"{per_large / per_small:.2f} (target <= 1.2); {rate:,.0f} lines/s "
              f"(target >= {target:,})")
    deep_chains()


if __name__ == "__main__":
    main()
