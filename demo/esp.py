"""The demo's IPsec peer: a remote site's gateway facing the agent's IPsec gateway NF (site-to-site tunnel).

The kernel here has no AES-GCM for xfrm, so the peer is the project's own `nf ipsec` in pcap mode with the
mirrored SAs: it encapsulates the remote host's cleartext frames into ESP (sent from the outside namespace
with a raw socket) and decapsulates the ESP the agent's gateway sends back (captured there with tcpdump).
Frames and pcap files are built with the standard library (pure functions, tested)."""

from __future__ import annotations

import ipaddress
import secrets
import struct

REMOTE_NET = "10.99.0.0/24"  # the remote site behind the peer gateway
REMOTE_HOST = "10.99.0.5"
GW_TUNNEL_IP = "192.0.2.1"  # the agent's gateway's tunnel address
SPI_IN, SPI_OUT = 0x2001, 0x2002  # seen from the agent's gateway
UDP_PORT = 5555


def sa_configs(vm_ip: str, peer_ip: str, keys: tuple[str, str] | None = None) -> tuple[dict, dict]:
    """(the agent's gateway config, the peer's config): AES-128-GCM, fresh keys unless given."""
    k_in, k_out = keys or (secrets.token_hex(16), secrets.token_hex(16))
    salt_in, salt_out = "0a0b0c0d", "1a1b1c1d"
    to_vm = {"src": REMOTE_NET, "dst": f"{vm_ip}/32"}
    from_vm = {"src": f"{vm_ip}/32", "dst": REMOTE_NET}
    inbound = {"spi": SPI_IN, "key": k_in, "salt": salt_in, "tunnel_src": peer_ip, "tunnel_dst": GW_TUNNEL_IP,
               "selectors": [to_vm]}  # fmt: skip
    outbound = {"spi": SPI_OUT, "key": k_out, "salt": salt_out, "tunnel_src": GW_TUNNEL_IP, "tunnel_dst": peer_ip,
                "selectors": [from_vm]}  # fmt: skip
    gw = {"sas": [{"name": "site-in", "dir": "in", **inbound}, {"name": "site-out", "dir": "out", **outbound}],
          "unprotected": "bypass"}  # fmt: skip
    peer = {"sas": [{"name": "site-in", "dir": "out", **inbound}, {"name": "site-out", "dir": "in", **outbound}],
            "unprotected": "bypass"}  # fmt: skip
    return gw, peer


def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _mac(text: str) -> bytes:
    return bytes(int(x, 16) for x in text.split(":"))


def udp_frame(
    src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, sport: int, dport: int, payload: bytes
) -> bytes:
    """Ethernet | IPv4 | UDP with correct checksums."""
    s, d = ipaddress.IPv4Address(src_ip).packed, ipaddress.IPv4Address(dst_ip).packed
    ulen = 8 + len(payload)
    pseudo = s + d + struct.pack("!BBH", 0, 17, ulen)
    udp = struct.pack("!HHHH", sport, dport, ulen, 0) + payload
    ucs = _csum(pseudo + udp) or 0xFFFF
    udp = udp[:6] + struct.pack("!H", ucs) + udp[8:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, 1, 0x4000, 64, 17, 0, s, d)
    ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
    return _mac(dst_mac) + _mac(src_mac) + b"\x08\x00" + ip + udp


def write_pcap(frames: list[bytes]) -> bytes:
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    for i, f in enumerate(frames):
        out.append(struct.pack("<IIII", 1_700_000_000 + i, 0, len(f), len(f)) + f)
    return b"".join(out)


def read_pcap(data: bytes) -> list[bytes]:
    """Frames of a classic pcap (either byte order, micro- or nanosecond); ValueError if it is not one."""
    if len(data) < 24:
        raise ValueError("pcap: shorter than its header")
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        end = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        end = ">"
    else:
        raise ValueError("pcap: bad magic")
    frames, off = [], 24
    while off + 16 <= len(data):
        incl = struct.unpack(f"{end}I", data[off + 8 : off + 12])[0]
        if off + 16 + incl > len(data):
            raise ValueError("pcap: truncated record")
        frames.append(data[off + 16 : off + 16 + incl])
        off += 16 + incl
    return frames


def esp_spi(frame: bytes) -> int | None:
    """The SPI of an Ethernet | IPv4 | ESP frame, None for anything else."""
    if len(frame) < 14 + 20 + 8 or frame[12:14] != b"\x08\x00" or frame[14 + 9] != 50:
        return None
    ihl = (frame[14] & 0x0F) * 4
    return struct.unpack("!I", frame[14 + ihl : 14 + ihl + 4])[0]


def udp_payload(frame: bytes) -> tuple[str, bytes] | None:
    """(source IP, payload) of an Ethernet | IPv4 | UDP frame, None for anything else."""
    if len(frame) < 14 + 20 + 8 or frame[12:14] != b"\x08\x00" or frame[14 + 9] != 17:
        return None
    ihl = (frame[14] & 0x0F) * 4
    return str(ipaddress.IPv4Address(frame[26:30])), frame[14 + ihl + 8 :]


# Run in the outside namespace (`ip netns exec NS python3 -c SEND IFACE FILE`): sends a pcap's frames raw.
SEND = (
    "import socket,struct,sys\n"
    "d=open(sys.argv[2],'rb').read();o=24\n"
    "s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW);s.bind((sys.argv[1],0))\n"
    "while o+16<=len(d):\n"
    " n=struct.unpack('<I',d[o+8:o+12])[0];s.send(d[o+16:o+16+n]);o+=16+n\n"
)
# Run in the VM's namespace: answers one datagram on UDP_PORT with b"REPLY:" + it, then exits.
ECHO = (
    "import socket,sys\n"
    "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind((sys.argv[1],int(sys.argv[2])));s.settimeout(30)\n"
    "d,a=s.recvfrom(2048);s.sendto(b'REPLY:'+d,a);print(a[0],d.decode(errors='replace'),flush=True)\n"
)
