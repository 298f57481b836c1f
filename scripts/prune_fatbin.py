#!/usr/bin/env python3
"""Keeps, in a CUDA shared library, only the GPU code for one architecture.

  prune_fatbin.py LIB ARCH OUT [--lower-ptx-isa]    e.g. prune_fatbin.py libggml-cuda.so 90 out.so

npm's CUDA libllama (@node-llama-cpp/linux-x64-cuda) holds ggml's kernels for seven GPU
architectures (159 MB); the GPU machine takes 64 MiB of carried files. Each fat binary in the
.nv_fatbin section keeps its place and size (the registration code points at it): its entries for
ARCH are written at its start, the last one's padding running to its end, so the rest is zeros
and the file compresses to about the one architecture's share. For an H100/H200 (90) that is
compute_90 PTX, which the driver compiles on first use. --lower-ptx-isa rewrites that PTX's
`.version` to the newest ISA a CUDA 13.0 driver (580.x) compiles: npm's build is CUDA 13.1's
(ISA 9.1), which such a driver refuses as "compiled with an unsupported toolchain".
"""
import re
import struct
import subprocess
import sys

FATBIN_MAGIC = 0xBA55ED50
PTX_KIND = 1
ZSTD_MAGIC = bytes.fromhex("28b52ffd")
DRIVER_PTX_ISA = (9, 0)
# Entry header fields (little endian) as nvcc writes them.
KIND_AT, HEADER_BYTES_AT, PADDED_BYTES_AT, PAYLOAD_BYTES_AT, VERSION_AT, ARCH_AT = 0, 4, 8, 16, 24, 28


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


def main():
    args = [a for a in sys.argv[1:] if a != "--lower-ptx-isa"]
    if len(args) != 3:
        sys.exit(__doc__.strip().splitlines()[2])
    lower_isa = "--lower-ptx-isa" in sys.argv
    path, keep_arch, out_path = args[0], int(args[1]), args[2]
    data = bytearray(open(path, "rb").read())
    offset, size = nv_fatbin_section(path)
    pos, end = offset, offset + size
    kept_bytes = fatbins = 0
    while pos + 16 <= end:
        magic, _version, header_bytes, fat_bytes = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # fat binaries are 8-byte aligned in the section
            continue
        region, region_end = pos + header_bytes, pos + header_bytes + fat_bytes
        kept, entry = [], region
        while entry < region_end:
            entry_header_bytes, padded_bytes = struct.unpack_from("<IQ", data, entry + HEADER_BYTES_AT)
            payload_bytes = struct.unpack_from("<I", data, entry + PAYLOAD_BYTES_AT)[0]
            if struct.unpack_from("<I", data, entry + ARCH_AT)[0] == keep_arch:
                header = bytes(data[entry : entry + entry_header_bytes])
                payload = bytes(data[entry + entry_header_bytes : entry + entry_header_bytes + payload_bytes])
                kept.append(lowered_ptx(header, payload) if lower_isa else (header, payload))
            entry += entry_header_bytes + padded_bytes
        if not kept:
            sys.exit(f"prune_fatbin: a fat binary at {pos:#x} has no code for architecture {keep_arch}")
        # The kept entries from the region's start; the last one's padding fills the region.
        data[region:region_end] = bytes(fat_bytes)
        at = region
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
        fatbins += 1
        pos = region_end
    open(out_path, "wb").write(data)
    print(f"prune_fatbin: {fatbins} fat binaries keep {kept_bytes / 2**20:.1f} MiB for architecture "
          f"{keep_arch}" + (f", PTX at ISA {DRIVER_PTX_ISA[0]}.{DRIVER_PTX_ISA[1]}" if lower_isa else ""))


if __name__ == "__main__":
    main()
