"""TAP output for the Python tests; tests/run.sh counts the lines.

    t = Tap()
    with t.case("name"):
        t.check(cond, "message")
    t.done()

A failed check raises inside the case, which is reported "not ok" and the
run continues with the next case. Run with /usr/bin/python3 (Debian's grpc).
"""
import sys
import traceback


class CheckFailed(Exception):
    pass


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def check(self, cond, msg=""):
        if not cond:
            raise CheckFailed(msg)

    def case(self, name):
        tap = self

        class _Case:
            def __enter__(self):
                return tap

            def __exit__(self, et, ev, tb):
                tap.n += 1
                if et is None:
                    print(f"ok {tap.n} - {name}", flush=True)
                    return False
                tap.failed += 1
                for line in (str(ev) or et.__name__).splitlines() or [""]:
                    print(f"# {line}")
                if et is not CheckFailed:
                    for line in traceback.format_exception(et, ev, tb):
                        for l2 in line.rstrip().splitlines():
                            print(f"# {l2}")
                print(f"not ok {tap.n} - {name}", flush=True)
                return et is not KeyboardInterrupt
        return _Case()

    def done(self):
        print(f"1..{self.n}", flush=True)
        sys.exit(1 if self.failed else 0)
