#!/usr/bin/env python3
"""Keeps, in a CUDA shared library, only the GPU code for one architecture.

  prune_fatbin.py LIB ARCH OUT [--lower-ptx-isa] [--sass PTXAS CACHE_DIR]
      e.g. prune_fatbin.py libggml-cuda.so 90 out.so --lower-ptx-isa

npm's CUDA libllama (@node-llama-cpp/linux-x64-cuda) holds ggml's kernels for seven GPU
architectures (159 MB); the GPU machine takes 64 MiB of carried files. Each fat binary in the
.nv_fatbin section keeps its place and size (the registration code points at it): its entries for
ARCH are written at its start, the last one's padding running to its end, so the rest is zeros
and the file compresses to about the one architecture's share. For an H100/H200 (90) that is
compute_90 PTX, which the driver compiles on first use. --lower-ptx-isa rewrites that PTX's
`.version` to the newest ISA a CUDA 13.0 driver (580.x) compiles: npm's build is CUDA 13.1's
(ISA 9.1), which such a driver refuses as "compiled with an unsupported toolchain".
--sass PTXAS CACHE_DIR compiles that PTX here with PTXAS (CUDA 13.0's, -arch=sm_ARCH) and stores
the machine code instead (zstd, as nvcc stores it), so the GPU compiles nothing when it loads a
module; the cubins are kept in CACHE_DIR by the PTX's hash (the first run takes ~15 minutes on
two cores).
"""
import concurrent.futures
import hashlib
import os
import re
import struct
import subprocess
import sys
import tempfile

FATBIN_MAGIC = 0xBA55ED50
PTX_KIND = 1
ELF_KIND = 2
ZSTD_MAGIC = bytes.fromhex("28b52ffd")
DRIVER_PTX_ISA = (9, 0)
# Entry header fields (little endian) as nvcc writes them.
KIND_AT, HEADER_BYTES_AT, PADDED_BYTES_AT, PAYLOAD_BYTES_AT, VERSION_AT, ARCH_AT = 0, 4, 8, 16, 24, 28
UNCOMPRESSED_BYTES_AT = 56


def nv_fatbin_section(path):
    """(file offset, size) of the .nv_fatbin section, read with readelf."""
    out = subprocess.run(["readelf", "-S", "-W", path], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        fields = line.replace("[ ", "[").split()
        if ".nv_fatbin" in fields:
            i = fields.index(".nv_fatbin")
            return int(fields[i + 3], 16), int(fields[i + 4], 16)
    sys.exit(f"prune_fatbin: {path} has no .nv_fatbin section")


def lowered_ptx(header, payload):
    """(header, payload) of a zstd PTX entry with its .version lowered to DRIVER_PTX_ISA; the
    entry unchanged when it is not zstd PTX of a newer ISA."""
    kind = struct.unpack_from("<H", header, KIND_AT)[0]
    if kind != PTX_KIND or not payload.startswith(ZSTD_MAGIC):
        return header, payload
    text = subprocess.run(["zstd", "-d", "-q", "-c"], input=payload, check=True, capture_output=True).stdout
    match = re.search(rb"^\.version (\d+)\.(\d+)", text, flags=re.M)
    if match is None or (int(match[1]), int(match[2])) <= DRIVER_PTX_ISA:
        return header, payload
    text = text[: match.start()] + b".version %d.%d" % DRIVER_PTX_ISA + text[match.end() :]
    packed = subprocess.run(["zstd", "-12", "-q", "-c"], input=text, check=True, capture_output=True).stdout
    header = bytearray(header)
    struct.pack_into("<I", header, VERSION_AT, DRIVER_PTX_ISA[0] << 16 | DRIVER_PTX_ISA[1])
    return bytes(header), packed


def compiled_sass(elf_header, ptx_entry, arch, ptxas, cache_dir):
    """An ELF entry (header from `elf_header`, another architecture's machine-code entry) holding
    the zstd cubin PTXAS makes of the PTX entry `ptx_entry` (header, payload) for sm_`arch`."""
    _header, payload = ptx_entry
    text = subprocess.run(["zstd", "-d", "-q", "-c"], input=payload, check=True, capture_output=True).stdout
    text = text.rstrip(b"\0")
    cubin_path = os.path.join(cache_dir, hashlib.sha256(text).hexdigest() + f".sm_{arch}.cubin")
    if not os.path.exists(cubin_path):
        with tempfile.TemporaryDirectory() as tmp:
            ptx_path = os.path.join(tmp, "module.ptx")
            with open(ptx_path, "wb") as f:
                f.write(text)
            subprocess.run([ptxas, f"-arch=sm_{arch}", "-o", cubin_path + ".part", ptx_path], check=True)
        os.replace(cubin_path + ".part", cubin_path)
    cubin = open(cubin_path, "rb").read()
    packed = subprocess.run(["zstd", "-12", "-q", "-c"], input=cubin, check=True, capture_output=True).stdout
    header = bytearray(elf_header)
    struct.pack_into("<I", header, ARCH_AT, arch)
    struct.pack_into("<Q", header, UNCOMPRESSED_BYTES_AT, len(cubin))
    return bytes(header), packed


def main():
    args = [a for a in sys.argv[1:] if a != "--lower-ptx-isa"]
    ptxas = cache_dir = None
    if "--sass" in args:
        at = args.index("--sass")
        ptxas, cache_dir = args[at + 1 : at + 3]
        del args[at : at + 3]
        os.makedirs(cache_dir, exist_ok=True)
    if len(args) != 3:
        sys.exit(__doc__.strip().splitlines()[2])
    lower_isa = "--lower-ptx-isa" in sys.argv or ptxas is not None
    path, keep_arch, out_path = args[0], int(args[1]), args[2]
    jobs = concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1)
    data = bytearray(open(path, "rb").read())
    offset, size = nv_fatbin_section(path)
    # First every fat binary's kept entries (compilations running meanwhile), then the writing.
    fatbins, pos, end = [], offset, offset + size
    while pos + 16 <= end:
        magic, _version, header_bytes, fat_bytes = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # fat binaries are 8-byte aligned in the section
            continue
        region, region_end = pos + header_bytes, pos + header_bytes + fat_bytes
        kept, elf_header, entry = [], None, region
        while entry < region_end:
            entry_header_bytes, padded_bytes = struct.unpack_from("<IQ", data, entry + HEADER_BYTES_AT)
            payload_bytes = struct.unpack_from("<I", data, entry + PAYLOAD_BYTES_AT)[0]
            header = bytes(data[entry : entry + entry_header_bytes])
            if struct.unpack_from("<H", header, KIND_AT)[0] == ELF_KIND:
                elf_header = header
            if struct.unpack_from("<I", data, entry + ARCH_AT)[0] == keep_arch:
                payload = bytes(data[entry + entry_header_bytes : entry + entry_header_bytes + payload_bytes])
                kept.append(lowered_ptx(header, payload) if lower_isa else (header, payload))
            entry += entry_header_bytes + padded_bytes
        if not kept:
            sys.exit(f"prune_fatbin: a fat binary at {pos:#x} has no code for architecture {keep_arch}")
        if ptxas is not None and elf_header is not None:
            ptx = [e for e in kept if struct.unpack_from("<H", e[0], KIND_AT)[0] == PTX_KIND]
            if len(ptx) == len(kept):  # PTX alone for this architecture: compile it here
                kept = [jobs.submit(compiled_sass, elf_header, ptx[0], keep_arch, ptxas, cache_dir)]
        fatbins.append((pos, region, region_end, kept))
        pos = region_end
    kept_bytes = 0
    for pos, region, region_end, kept in fatbins:
        # The kept entries from the region's start; the last one's padding fills the region.
        data[region:region_end] = bytes(region_end - region)
        at = region
        kept = [e.result() if isinstance(e, concurrent.futures.Future) else e for e in kept]
        for i, (header, payload) in enumerate(kept):
            last = i == len(kept) - 1
            padded = region_end - at - len(header) if last else (len(payload) + 7) // 8 * 8
            if padded < len(payload):
                sys.exit(f"prune_fatbin: the code for architecture {keep_arch} at {pos:#x} does not fit")
            header = bytearray(header)
            struct.pack_into("<Q", header, PADDED_BYTES_AT, padded)
            struct.pack_into("<I", header, PAYLOAD_BYTES_AT, len(payload))
            data[at : at + len(header)] = header
            data[at + len(header) : at + len(header) + len(payload)] = payload
            at += len(header) + padded
            kept_bytes += len(payload)
    open(out_path, "wb").write(data)
    print(f"prune_fatbin: {len(fatbins)} fat binaries keep {kept_bytes / 2**20:.1f} MiB for architecture "
          f"{keep_arch}" + (f", machine code compiled by {ptxas}" if ptxas else
                            f", PTX at ISA {DRIVER_PTX_ISA[0]}.{DRIVER_PTX_ISA[1]}" if lower_isa else ""))


if __name__ == "__main__":
    main()
