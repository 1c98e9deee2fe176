"""One step of the ORWL papers' ring (examples/blockbound), as an external program.

    step.py block TASK BLOCK LEFT NEW   write to NEW the block read from BLOCK, updated
                                        with the left neighbour's bound read from LEFT
    step.py bound BLOCK BOUND           write to BOUND the last value of BLOCK

Files hold float64 values in the machine's byte order, as ORWL locations do. The update
does the same IEEE operations in the same order as the Go step (blockring.Step), so the
results are identical bit for bit:

    new[j] = (block[j] + left) / 2 + ((j + TASK) % 7)

Standard library only; examples/external runs it with python3 -I -S.
"""

import sys
from array import array


def read(path):
    values = array("d")
    with open(path, "rb") as f:
        values.frombytes(f.read())
    return values


def write(path, values):
    with open(path, "wb") as f:
        values.tofile(f)


def main(args):
    if len(args) == 5 and args[0] == "block":
        task = int(args[1])
        block = read(args[2])
        (left,) = read(args[3])
        for j, x in enumerate(block):
            block[j] = (x + left) / 2 + float((j + task) % 7)
        write(args[4], block)
    elif len(args) == 3 and args[0] == "bound":
        write(args[2], read(args[1])[-1:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
