"""Reading a generator's sockets from a host's /proc/net tables (traffic.waiting): several
tables as one text, as a real host's ``cat`` gives them."""

import socket
from pathlib import Path

from tunnelbench.traffic import waiting

TABLES = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: 0200A8C0:1451 0100A8C0:D2A4 01 00000000:00000000 00:00000000 00000000     0        0 2 1
   2: 0200A8C0:1451 0100A8C0:D2A6 01 00000000:00000000 00:00000000 00000000     0        0 3 1
  sl  local_address                         remote_address                        st tx_queue
   0: 00000000000000000000000000000000:1452 00000000000000000000000000000000:0000 0A 00000000
"""


def test_each_tables_sockets_are_read_and_their_headings_skipped():
    found = waiting.sockets(TABLES)
    assert found == [(5201, "0A"), (5201, "01"), (5201, "01"), (5202, "0A")]
    assert found.count((5201, waiting.ESTABLISHED)) == 2


def test_a_listener_of_this_machine_is_found_in_its_own_table():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        text = Path("/proc/net/tcp").read_text()
        assert (port, waiting.LISTEN) in waiting.sockets(text)
