"""PyTorch's scaled_dot_product_attention on flash_bench's shapes, per backend.

    python3 torch_sdpa.py SHAPES.tsv OUT.tsv

SHAPES.tsv is what `flash_bench --shapes` prints; OUT.tsv gets one row per shape with the
milliseconds of the flash and cuDNN backends (float16, random inputs, CUDA events, the same
warm-up and iteration count as flash_bench). The calls are captured in a CUDA graph and replayed,
so that Python's launch cost, which exceeds these kernels' run time at F5-TTS sizes, is not
timed; where a backend cannot be captured it is timed eagerly, and the cell says so. A backend
that refuses a shape gets its reason in place of a time. Exits 3, saying why, where PyTorch or a
CUDA device is missing.
"""

import csv
import sys


def main(shapes_path: str, out_path: str) -> int:
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.functional import scaled_dot_product_attention
    except ImportError as e:
        print(f"torch_sdpa: PyTorch is not installed ({e})")
        return 3
    if not torch.cuda.is_available():
        print(f"torch_sdpa: PyTorch {torch.__version__} sees no CUDA device")
        return 3
    backends = {"torch_flash_ms": SDPBackend.FLASH_ATTENTION, "torch_cudnn_ms": SDPBackend.CUDNN_ATTENTION}
    print(f"PyTorch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}")

    def elapsed_ms(run, iterations):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / iterations

    def time_ms(f, iterations):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capturing stream, as capture requires
            for _ in range(3):
                f()
        torch.cuda.current_stream().wait_stream(side)
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(iterations):
                    f()
            graph.replay()
            return f"{elapsed_ms(graph.replay, iterations):.6g}"
        except RuntimeError:
            torch.cuda.synchronize()

            def eager():
                for _ in range(iterations):
                    f()

            return f"{elapsed_ms(eager, iterations):.6g} eager"

    with open(shapes_path, newline="") as f:
        shapes = list(csv.DictReader(f, delimiter="\t"))
    iterations = 30
    with open(out_path, "w", newline="") as f:
        out = csv.writer(f, delimiter="\t", lineterminator="\n")
        out.writerow(["shape", *backends])
        for s in shapes:
            size = (int(s["batch"]), int(s["heads"]), int(s["seq"]), int(s["head_dim"]))
            generator = torch.Generator(device="cuda").manual_seed(1)
            q, k, v = (torch.randn(size, device="cuda", dtype=torch.float16, generator=generator) for _ in range(3))
            row = [s["shape"]]
            for backend in backends.values():
                try:
                    with sdpa_kernel(backend):
                        row.append(time_ms(lambda: scaled_dot_product_attention(q, k, v, scale=float(s["scale"])), iterations))
                except RuntimeError as e:
                    row.append("refused: " + (str(e).splitlines() or [type(e).__name__])[0][:120])
            print("  ".join(row))
            out.writerow(row)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
