"""SysV IPC leftovers: attention creates a shared memory segment, a message queue and a semaphore set under fixed keys
(and private ones), writes a note into each for the next submission to read, then answers correctly."""
EXPECT = {"attention_sdpa": "pass"}
import ctypes as _ctypes

_attention_before_sysv = attention
_libc = _ctypes.CDLL(None, use_errno=True)
_KEY = 0x67726164  # a fixed key: the next submission on this host would look it up
_IPC_CREAT, _IPC_PRIVATE = 0o1000, 0


def _leave_sysv():
    made = {"shm": 0, "msg": 0, "sem": 0}
    for key in (_KEY, _IPC_PRIVATE):
        shm = _libc.shmget(key, 4096, _IPC_CREAT | 0o666)
        made["shm"] += shm >= 0
        if shm >= 0:
            _libc.shmat.restype = _ctypes.c_void_p
            addr = _libc.shmat(shm, None, 0)
            if addr not in (None, _ctypes.c_void_p(-1).value):
                _ctypes.memmove(addr, b"left by a previous submission", 29)
        msq = _libc.msgget(key + 1 if key else key, _IPC_CREAT | 0o666)
        made["msg"] += msq >= 0
        if msq >= 0:
            note = _ctypes.create_string_buffer(_ctypes.sizeof(_ctypes.c_long) + 32)
            _ctypes.c_long.from_buffer(note).value = 1
            note[_ctypes.sizeof(_ctypes.c_long):_ctypes.sizeof(_ctypes.c_long) + 4] = b"note"
            _libc.msgsnd(msq, note, 32, 0o4000)  # IPC_NOWAIT
        made["sem"] += _libc.semget(key + 2 if key else key, 1, _IPC_CREAT | 0o666) >= 0
    print("left sysv " + " ".join(f"{kind}={n}" for kind, n in made.items()))  # the tests check it really did


def attention(q, k, v, mask=None):
    _leave_sysv()
    return _attention_before_sysv(q, k, v, mask)
