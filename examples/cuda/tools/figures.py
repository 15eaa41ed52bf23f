"""The README's figure table, made from gpu_check.sh's measurements and copied from its results.

    python3 figures.py table GPU BENCH.tsv TORCH.tsv   # prints the table between its markers
    python3 figures.py fill RESULTS.md README.md       # README's table := the results file's

BENCH.tsv is what `flash_bench --tsv` writes, TORCH.tsv what torch_sdpa.py writes (or a missing
file, when PyTorch with CUDA was not there). `fill` copies the marked table from the results file
into the README, so the README's figures are only ever the last run's, never typed in.
"""

import csv
import pathlib
import sys

BEGIN = "<!-- gpu-figures: begin (written by gpu_check.sh from its results file; do not edit) -->"
END = "<!-- gpu-figures: end -->"


class FiguresError(Exception):
    pass


def read_rows(path: pathlib.Path) -> dict[str, dict[str, str]]:
    with path.open(newline="") as f:
        return {row["shape"]: row for row in csv.DictReader(f, delimiter="\t")}


def millis(text: str | None) -> str:
    if text is None:
        return "—"
    try:
        return f"{float(text):.3f}"
    except ValueError:
        return text.replace("|", "\\|")  # a backend's refusal, as torch_sdpa.py wrote it


def table(gpu: str, bench: pathlib.Path, torch: pathlib.Path) -> str:
    rows = read_rows(bench)
    if not rows:
        raise FiguresError(f"{bench}: no figures")
    measured = read_rows(torch) if torch.exists() else {}
    absent = "no PyTorch with CUDA" if not torch.exists() else None
    lines = [
        BEGIN,
        "| shape | GPU | fused (ms, TFLOP/s) | unfused cuBLAS (ms) | PyTorch SDPA flash (ms) | PyTorch SDPA cuDNN (ms) |",
        "|---|---|---|---|---|---|",
    ]
    for shape, row in rows.items():
        other = measured.get(shape, {})
        lines.append(
            f"| {shape} | {gpu} | {float(row['fused_ms']):.3f} ({float(row['fused_tflops']):.0f}) "
            f"| {float(row['unfused_ms']):.3f} | {absent or millis(other.get('torch_flash_ms'))} "
            f"| {absent or millis(other.get('torch_cudnn_ms'))} |"
        )
    lines.append(END)
    return "\n".join(lines) + "\n"


def marked(text: str, where: str) -> tuple[int, int]:
    begin, end = text.find(BEGIN), text.find(END)
    if begin < 0 or end < begin:
        raise FiguresError(f"{where}: no figure table between the gpu-figures markers")
    return begin, end + len(END)


def fill(results: pathlib.Path, readme: pathlib.Path) -> None:
    source = results.read_text()
    begin, end = marked(source, str(results))
    target = readme.read_text()
    t_begin, t_end = marked(target, str(readme))
    readme.write_text(target[:t_begin] + source[begin:end] + target[t_end:])


def main(argv: list[str]) -> int:
    try:
        if len(argv) == 5 and argv[1] == "table":
            sys.stdout.write(table(argv[2], pathlib.Path(argv[3]), pathlib.Path(argv[4])))
        elif len(argv) == 4 and argv[1] == "fill":
            fill(pathlib.Path(argv[2]), pathlib.Path(argv[3]))
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (FiguresError, OSError, KeyError, ValueError) as e:
        print(f"figures.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
