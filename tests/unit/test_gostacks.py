"""The one-line reading of a Go SIGQUIT dump: where a hung garagemq's goroutines wait."""

from __future__ import annotations

from conformance.targets.gostacks import blocked_in, summary

PKG = "github.com/valinurovam/garagemq/"

# The shape of the Go runtime's dump (garagemq built with Go 1.19, Debian's package), trimmed.
DUMP = """SIGQUIT: quit
PC=0x470981 m=0 sigcode=0

goroutine 1 [select (no cases)]:
runtime.block()
\truntime/select.go:104 +0x2c
github.com/valinurovam/garagemq/server.(*Server).Start(0xc0000f01b0)
\tgithub.com/valinurovam/garagemq/server/server.go:120 +0x3af

goroutine 40 [semacquire, 3 minutes]:
sync.runtime_SemacquireMutex(0xc000123?, 0x0?, 0x1?)
\truntime/sema.go:77 +0x25
sync.(*RWMutex).Lock(0xc0001f4)
\tsync/rwmutex.go:147 +0x71
github.com/sasha-s/go-deadlock.lock(0xc00, 0xc00)
\tgithub.com/sasha-s/go-deadlock/deadlock.go:170 +0x1a
github.com/valinurovam/garagemq/queue.(*Queue).Delete(0xc000212, 0x0, 0x0)
\tgithub.com/valinurovam/garagemq/queue/queue.go:400 +0x8f
github.com/valinurovam/garagemq/server.(*VirtualHost).DeleteQueue(0xc0, {0xc0, 0x20}, 0x0, 0x0)
\tgithub.com/valinurovam/garagemq/server/vhost.go:300 +0x1b

goroutine 41 [sync.RWMutex.RLock, 3 minutes]:
sync.runtime_SemacquireRWMutexR(0xc0?, 0x0?, 0x0?)
\truntime/sema.go:82 +0x25
github.com/valinurovam/garagemq/server.(*VirtualHost).GetQueue(...)
\tgithub.com/valinurovam/garagemq/server/vhost.go:200

goroutine 42 [semacquire]:
sync.runtime_SemacquireMutex(0xc000123?, 0x0?, 0x1?)
\truntime/sema.go:77 +0x25
github.com/valinurovam/garagemq/queue.(*Queue).Delete(0xc000299, 0x0, 0x0)
\tgithub.com/valinurovam/garagemq/queue/queue.go:400 +0x8f

goroutine 7 [IO wait]:
internal/poll.runtime_pollWait(0x7f, 0x72)
\truntime/netpoll.go:305 +0x89

goroutine 9 [chan receive]:
github.com/valinurovam/garagemq/server.(*VirtualHost).handleConfirms()
\tgithub.com/valinurovam/garagemq/server/vhost.go:88 +0x45
"""


def test_counts_goroutines_and_names_the_first_frame_of_the_program() -> None:
    total, found = blocked_in(DUMP, PKG)
    assert total == 6
    assert found == {
        "select (no cases) in server.(*Server).Start": 1,
        "semacquire in queue.(*Queue).Delete": 2,  # the library frame before it is skipped
        "sync.RWMutex.RLock in server.(*VirtualHost).GetQueue": 1,
        "chan receive in server.(*VirtualHost).handleConfirms": 1,
    }


def test_summary_names_the_lock_waits_most_common_first() -> None:
    assert summary(DUMP, PKG) == (
        "6 goroutines, 3 waiting on a lock: 2× semacquire in queue.(*Queue).Delete; "
        "1× sync.RWMutex.RLock in server.(*VirtualHost).GetQueue"
    )
    assert summary(DUMP, PKG, top=1).endswith("; +1 more")


def test_an_idle_program_has_no_lock_waits() -> None:
    idle = DUMP.split("goroutine 40")[0]
    assert summary(idle, PKG) == "1 goroutines, none waiting on a lock in github.com/valinurovam/garagemq"
