#!/usr/bin/python3
"""scripts/goodput.py's arithmetic on a scripted schedule (issue 38): work
per second under faults over the same without faults, failed runs counting
no work, and the kill schedule drawn from a seed. Pure Python, no job.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', 'scripts'))
import goodput  # noqa: E402


class GoodputTest(unittest.TestCase):
    def test_scripted_schedule(self):
        # Two pairs of 1,000 steps: unfaulted 10 s and 12 s; faulted 10.5 s
        # and 11.5 s. 2000/22 over 2000/22: 100 %.
        self.assertAlmostEqual(
            goodput.goodput([(1000, 10.5), (1000, 11.5)],
                            [(1000, 10.0), (1000, 12.0)]), 1.0)
        # A kill costs 2 s of a 20 s run: 20/22.
        self.assertAlmostEqual(
            goodput.goodput([(1000, 22.0)], [(1000, 20.0)]), 20 / 22)

    def test_failed_run_counts_no_work(self):
        # One faulted run failed after 30 s: its time counts, its work not.
        g = goodput.goodput([(1000, 20.0), (0, 30.0)], [(1000, 20.0)])
        self.assertAlmostEqual(g, (1000 / 50) / (1000 / 20))

    def test_no_time_no_goodput(self):
        self.assertIsNone(goodput.goodput([], [(1000, 20.0)]))
        self.assertIsNone(goodput.goodput([(1000, 20.0)], [(0, 20.0)]))

    def test_kill_schedule(self):
        specs = goodput.kill_specs(30, 100, seed=7)
        self.assertEqual([s.split(':after=')[1] for s in specs],
                         ['30s', '60s', '90s'])
        self.assertTrue(all(s.startswith('kill:pick=0.') for s in specs))
        self.assertEqual(specs, goodput.kill_specs(30, 100, seed=7))
        self.assertNotEqual(specs, goodput.kill_specs(30, 100, seed=8))

    def test_table(self):
        t = goodput.table('kill30', 'cpp', [(1000, 22.0)], [(1000, 20.0)], 1)
        self.assertIn('| kill30 | cpp | 1 / 1 | 1 | 45.5 | 50.0 | 90.9 % |',
                      t)


if __name__ == '__main__':
    unittest.main()
