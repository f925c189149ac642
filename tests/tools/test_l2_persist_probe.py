"""The persisting-L2 probe (tools/l2_persist_probe.py) on the CPU: its ctypes mirrors of cuda.h's
structures have the driver's layout (CUDA 13's cuda.h: CUaccessPolicyWindow, 32 bytes; the stream
attribute value, a 64-byte union); the probe itself needs a GPU."""

import ctypes

from tools.l2_persist_probe import AccessPolicyWindow, StreamAttrValue


def test_the_window_has_the_drivers_layout():
    offsets = [getattr(AccessPolicyWindow, name).offset for name in ("base_ptr", "num_bytes", "hitRatio", "hitProp", "missProp")]
    assert offsets == [0, 8, 16, 20, 24]
    assert ctypes.sizeof(AccessPolicyWindow) == 32


def test_the_stream_attribute_value_is_the_drivers_64_byte_union():
    assert ctypes.sizeof(StreamAttrValue) == 64
    assert StreamAttrValue.accessPolicyWindow.offset == 0
