from onecluster.telemetry import PACKET_SIZE, Packet, decode, encode


def test_a_probe_and_its_reply_survive_the_wire() -> None:
    probe = Packet("probe", 41, 1_700_000_000_123_456_789)
    data = encode(probe)
    assert len(data) == PACKET_SIZE
    assert decode(data) == probe
    reply = Packet("reply", 41, probe.sent_ns, 1_700_000_000_200_000_000)
    assert decode(encode(reply)) == reply


def test_anything_else_is_not_a_packet() -> None:
    assert decode(b"") is None
    assert decode(b"GET / HTTP/1.1\r\n\r\n" + b"\0" * 64) is None
    forged = bytearray(encode(Packet("probe", 1, 2)))
    forged[4] = 9  # an unknown kind
    assert decode(bytes(forged)) is None
