"""Can one simulator process keep its token schedule at 2x the calibrated C=32 rate?

Starts ``python -m autospec.sim`` with the default profile, noise off and
``--sim-time-scale 0.5`` (every simulated duration halved, so the scheduled rate is twice
the calibrated one), drives it with a lean closed-loop streaming client at C=32, and
reads the server's own counters (``/server_info`` ``internal_states[0].sim_*``):

- scheduled tok/s = tokens emitted / simulated GPU seconds of the steps that emitted them;
- achieved tok/s  = tokens emitted / real seconds the server was busy;
- ratio = achieved / scheduled (1.00 = the schedule was kept; below = the server fell behind).

Also printed: the target (2 x predict()'s calibrated C=32 aggregate), the client-measured
aggregate, the server's CPU share and its worst step lateness.

    .venv/bin/python benchmarks/sim_capacity.py [--scale 0.5] [--concurrency 32] [--output-len 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import urllib.request

from _sim_server import cpu_seconds, flag_words, pick_free_port, sim_argv, spawn_ready, stop_sim

from autospec.sim import load_profile, predict

FLAGS = {
    "speculative_algorithm": "NEXTN",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
}
PROMPT = " ".join(f"w{i}" for i in range(32))


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


async def stream_one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int, output_len: int) -> int:
    """One /v1/completions stream on a keep-alive connection; returns completion tokens."""
    body = json.dumps(
        {
            "prompt": PROMPT,
            "stream": True,
            "max_tokens": output_len,
            "ignore_eos": True,
            "temperature": 0,
            "stream_options": {"include_usage": True},
        }
    ).encode()
    writer.write(
        b"POST /v1/completions HTTP/1.1\r\nhost: 127.0.0.1:%d\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (port, len(body), body)
    )
    await writer.drain()
    await reader.readuntil(b"\r\n\r\n")  # response head
    tail = b""
    while not tail.endswith(b"0\r\n\r\n"):
        chunk = await reader.read(65536)
        if not chunk:
            raise ConnectionError("server closed the stream")
        tail = (tail + chunk)[-8192:]
    usage = tail[tail.rindex(b'"usage":{') + 8 :]
    return json.loads(usage[: usage.index(b"}") + 1])["completion_tokens"]


async def drive(port: int, concurrency: int, requests: int, output_len: int) -> tuple[int, float]:
    remaining = requests
    tokens = 0

    async def worker() -> None:
        nonlocal remaining, tokens
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while remaining > 0:
                remaining -= 1
                count = await stream_one(reader, writer, port, output_len)
                tokens += count
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return tokens, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.5, help="--sim-time-scale (0.5 = 2x the calibrated rate)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=500)
    parser.add_argument("--requests", type=int, default=None, help="default: 3 x concurrency")
    args = parser.parse_args()
    requests = args.requests or 3 * args.concurrency

    profile = load_profile()
    calibrated = predict(profile, {"model_path": "sim", **FLAGS}, 32, "synthetic", input_len=32, output_len=1000)
    port = pick_free_port()
    url = f"http://127.0.0.1:{port}"
    options = ["--model-path", "sim", *flag_words(FLAGS), "--sim-noise", "off", "--sim-load-seconds", "0"]
    proc = spawn_ready(sim_argv(port, *options, "--sim-time-scale", str(args.scale)), port)
    try:
        before = get_json(url + "/server_info")["internal_states"][0]
        cpu_before, wall_before = cpu_seconds(proc.pid), time.perf_counter()
        tokens, wall = asyncio.run(drive(port, args.concurrency, requests, args.output_len))
        cpu = cpu_seconds(proc.pid) - cpu_before
        server_wall = time.perf_counter() - wall_before
        after = get_json(url + "/server_info")["internal_states"][0]
    finally:
        stop_sim(proc)

    emitted = after["sim_emitted_tokens"] - before["sim_emitted_tokens"]
    scheduled_s = after["sim_scheduled_seconds"] - before["sim_scheduled_seconds"]
    busy_s = after["sim_busy_seconds"] - before["sim_busy_seconds"]
    scheduled = emitted / scheduled_s
    achieved = emitted / busy_s
    target = calibrated.aggregate_tok_s / 0.5
    print(
        f"profile {profile.name}, C={args.concurrency}, {requests} requests x {args.output_len} tokens, "
        f"--sim-time-scale {args.scale}"
    )
    print(f"  target (2x calibrated C=32 aggregate)  {target:9.1f} tok/s")
    print(f"  scheduled by the sim                    {scheduled:9.1f} tok/s  ({scheduled / target:.2f} x target)")
    print(f"  achieved by the sim                     {achieved:9.1f} tok/s")
    print(f"  achieved / scheduled                    {achieved / scheduled:9.3f}")
    print(f"  client-measured aggregate               {tokens / wall:9.1f} tok/s  ({tokens} tokens in {wall:.2f} s)")
    print(f"  server CPU                              {cpu / server_wall:9.1%} of one core")
    print(f"  worst step lateness                     {after['sim_max_lag_seconds'] * 1e3:9.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
