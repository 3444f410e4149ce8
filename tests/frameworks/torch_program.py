#!/usr/bin/env python3
"""A small PyTorch program of the kinds users run, as a subject for the analysis tools.

bf16 autocast training steps of a conv net (cuDNN convolutions, cuBLAS matmuls), a CUDA graph
captured once and replayed, a matmul on a side stream joined by an event, a Triton JIT kernel,
and (with --workers N) a DataLoader whose worker processes fork after CUDA is initialised and
touch no GPU themselves, as DataLoaders do. It prints a few rounded figures that depend on every
part, so a tool that changed what ran changes the output, and exits 0; without torch or a CUDA
device it says why and exits 77.
Usage: torch_program.py [--steps N] [--workers N]
"""
import argparse
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20, help="training steps (default 20)")
    ap.add_argument("--workers", type=int, default=0, help="DataLoader worker processes (default 0)")
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"torch_program: skipped: torch is not importable ({e})")
        return 77
    if not torch.cuda.is_available():
        print("torch_program: skipped: no CUDA device")
        return 77
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    dev = torch.device("cuda")

    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(),
        torch.nn.Linear(64 * 16, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    data = torch.utils.data.TensorDataset(torch.randn(512, 3, 32, 32), torch.randint(0, 10, (512,)))
    loader = torch.utils.data.DataLoader(data, batch_size=64, num_workers=args.workers)
    losses = []
    step = 0
    while step < args.steps:
        for x, y in loader:
            if step == args.steps:
                break
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(net(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            step += 1

    # A CUDA graph of the forward pass, captured on a side stream after warm-up, replayed 10 times.
    static_x = torch.randn(64, 3, 32, 32, device=dev)
    net.eval()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(3):
            net(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        static_y = net(static_x)
    for _ in range(10):
        graph.replay()
    torch.cuda.synchronize()
    graph_sum = static_y.float().sum().item()

    # A matmul on a side stream, joined to the default stream by an event.
    a = torch.randn(2048, 2048, device=dev)
    b = torch.randn(2048, 2048, device=dev)
    done = torch.cuda.Event()
    with torch.cuda.stream(side):
        c = a @ b
        done.record(side)
    torch.cuda.current_stream().wait_event(done)
    mm = (c - a.double().matmul(b.double()).float()).abs().max().item() / c.abs().max().item()

    triton = triton_add(torch, dev)
    print(f"loss first {losses[0]:.2f} last {losses[-1]:.2f} steps {len(losses)}")
    print(f"graph replayed 10: output finite {bool(torch.isfinite(static_y).all())} sum sign {graph_sum >= 0}")
    print(f"side-stream matmul relative error below 1e-2: {mm < 1e-2}")
    print(f"triton: {triton}")
    return 0


def triton_add(torch, dev):
    """A Triton JIT kernel (vector add), checked against torch; 'not importable' without Triton."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return "not importable"

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    n = 1 << 20
    x = torch.rand(n, device=dev)
    y = torch.rand(n, device=dev)
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return "ok" if torch.equal(out, x + y) else "WRONG"


if __name__ == "__main__":
    sys.exit(main())
