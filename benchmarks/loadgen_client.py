#!/usr/bin/python3
"""The Python comparison client for bench_loadgen: an asyncio + aiohttp streaming client doing
the same work as kvprof's runner (POST /v1/completions with stream=true, parse every SSE event
as JSON, count tokens, timestamp each one). Prints one JSON line with what it saw ("reads": the
body pieces aiohttp handed over; tokens in one piece are timed when it was handed over).

Run with Debian's /usr/bin/python3 (python3-aiohttp)."""
import argparse
import asyncio
import json
import time

import aiohttp


async def one_request(session, url, body, stats):
    t_send = time.perf_counter()
    first = None
    token_times = []
    async with session.post(url, json=body) as resp:
        if resp.status != 200:
            stats["errors"] += 1
            await resp.read()
            return
        buf = b""
        async for piece in resp.content.iter_any():
            stats["reads"] += 1
            buf += piece
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                for line in event.split(b"\n"):
                    if not line.startswith(b"data:"):
                        continue
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        continue
                    chunk = json.loads(data)
                    choices = chunk.get("choices") or []
                    if choices and choices[0].get("text"):
                        now = time.perf_counter()
                        if first is None:
                            first = now
                        token_times.append(now)
    stats["tokens"] += len(token_times)
    stats["requests"] += 1
    if first is not None:
        stats["ttft_sum_s"] += first - t_send


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--concurrency", type=int, required=True)
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--max-tokens", type=int, required=True)
    args = ap.parse_args()
    stats = {"tokens": 0, "requests": 0, "errors": 0, "reads": 0, "ttft_sum_s": 0.0}
    sem = asyncio.Semaphore(args.concurrency)
    connector = aiohttp.TCPConnector(limit=args.concurrency)
    timeout = aiohttp.ClientTimeout(total=600)
    prompt = [1000, 1001, 1002, 1003]

    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        async def guarded(i):
            async with sem:
                body = {"model": "fake", "prompt": prompt, "max_tokens": args.max_tokens,
                        "stream": True, "stream_options": {"include_usage": True},
                        "ignore_eos": True, "temperature": 0}
                await one_request(session, args.url, body, stats)

        t0 = time.perf_counter()
        await asyncio.gather(*(guarded(i) for i in range(args.requests)))
        stats["wall_s"] = time.perf_counter() - t0
    print(json.dumps(stats), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
