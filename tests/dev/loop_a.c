/*
 * loop_a.c - with loop_b.c, two files that call each other: the fixture that
 * shows tools/dev/callgraph-cycles reports a loop (test callgraph_catches_loop).
 */
int srl_fixture_b(int n);

int srl_fixture_a(int n)
{
    return n <= 0 ? 0 : srl_fixture_b(n - 1);
}
