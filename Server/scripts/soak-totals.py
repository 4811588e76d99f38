#!/usr/bin/env python3
"""Adds up the soak-client result lines of a soak (crash-soak.sh, cluster-soak.sh).

Usage: soak-totals.py WORK CLIENTS  (reads WORK/client1.log ... WORK/clientN.log, the last line of each)
Prints one line: notes written, acknowledgements seen, lost, applied twice, out of order, converged, and
registrations beyond each client's first. A client that could not check the server has no figures (it
failed, and its line says why).
"""
import re
import sys

work, clients = sys.argv[1], int(sys.argv[2])
totals = dict(written=0, acknowledged=0, lost=0, twice=0, converged=0, registers=0, out_of_order=0, checked=0)
for index in range(1, clients + 1):
    line = open(f"{work}/client{index}.log").read().strip().splitlines()[-1]
    if "written" not in line:
        continue
    number = lambda name: int(re.search(name + r" (\d+)", line).group(1))
    totals["checked"] += 1
    totals["written"] += number("written")
    totals["acknowledged"] += number("acknowledged")
    totals["lost"] += number("lost")
    totals["twice"] += number("applied twice")
    totals["registers"] += number("registers")
    totals["converged"] += "converged true" in line and "client equals server true" in line
    totals["out_of_order"] += "in order false" in line
print(f"{totals['written']} notes written, {totals['acknowledged']} acknowledgements seen; "
      f"lost {totals['lost']}, applied twice {totals['twice']}, out of order {totals['out_of_order']}; "
      f"converged {totals['converged']}/{clients}; registrations {totals['registers']} "
      f"({totals['registers'] - totals['checked']} beyond each client's first)")
