/*
 * loop_b.c - the other half of the loop fixture (see loop_a.c).
 */
int srl_fixture_a(int n);

int srl_fixture_b(int n)
{
    return n <= 0 ? 1 : srl_fixture_a(n - 1);
}
