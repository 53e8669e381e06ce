<?php
/*
 * SrlLimiter.php - one key's Symfony LimiterInterface over an srl segment.
 *
 * Made by SrlRateLimiterFactory::create().  Each call is one srl decision
 * under the key's lock in the shared segment (srl_acquire, srl_reserve,
 * srl_peek, srl_reset_key), turned into Symfony's RateLimit / Reservation:
 *   isAccepted()          srl's allowed (a reservation that must wait: false,
 *                         as Symfony's own limiters answer it)
 *   getRemainingTokens()  srl's remaining (requests of cost 1 still free now)
 *   getRetryAfter()       the wall clock at the decision plus srl's
 *                         retry_after (to the microsecond, rounded up, so
 *                         RateLimit::wait() never wakes early); when
 *                         accepted, the decision's instant
 *   getLimit()            the config's limit (a token bucket's burst)
 * decision() returns srl's own decision behind the last answer (Srl's
 * array, with 'at': the wall clock it was turned into a RateLimit with).
 *
 * reserve(): token_bucket waits (srl_reserve: the tokens are taken now for
 * the instant the Reservation names, across every process); the windows
 * cannot: sliding_window throws ReserveNotSupportedException as Symfony's
 * does; fixed_window answers a reservation that needs no wait, and throws
 * ReserveNotSupportedException for one that would wait within $maxTime.
 * Waits beyond $maxTime throw MaxWaitDurationExceededException carrying the
 * refused RateLimit (retryAfter: when the tokens will be free).  $maxTime
 * null waits at most srl's longest reservation (1 h, SRL_WAIT_MAX_NS).
 *
 * An exempt key (the factory's 'exempt' option) is never refused:
 * EXEMPT_SRL, the segment marks it exempt and decides it (accepted,
 * remaining what its policy would leave, counted in stats()['exempt']; a
 * ban by hand still wins); EXEMPT_HERE, a store that keeps no exemptions
 * (Redis): accepted here without asking srl, remaining the limit.
 * decision() has 'exempt' => true|false.  Symfony's own errors stay
 * (more tokens than the limit, sliding_window's reserve()).
 *
 * No state of its own: every answer is the segment's (EXEMPT_HERE aside).
 */
declare(strict_types=1);

namespace Srl\Symfony;

use Symfony\Component\RateLimiter\Exception\MaxWaitDurationExceededException;
use Symfony\Component\RateLimiter\Exception\ReserveNotSupportedException;
use Symfony\Component\RateLimiter\LimiterInterface;
use Symfony\Component\RateLimiter\RateLimit;
use Symfony\Component\RateLimiter\Reservation;

final class SrlLimiter implements LimiterInterface
{
    private const WAIT_MAX_NS = 3600 * 1000000000;   /* srl.h SRL_WAIT_MAX_NS */

    public const EXEMPT_NO = 0;     /* limited */
    public const EXEMPT_SRL = 1;    /* marked exempt in the segment, decided by srl */
    public const EXEMPT_HERE = 2;   /* the store keeps no exemptions: accepted here */

    private ?array $last = null;

    /* @internal: made by SrlRateLimiterFactory::create() */
    public function __construct(private \Srl $srl, private string $key, private string $policy,
                                private int $limit, private int $exempt = self::EXEMPT_NO)
    {
    }

    /* @internal: mark $key exempt in $srl's segment; which EXEMPT_* it got. */
    public static function markExempt(\Srl $srl, string $key): int
    {
        try {
            $srl->exempt($key);
            return self::EXEMPT_SRL;
        } catch (\SrlException $e) {
            if ($e->getCode() === \SrlError::ENOTSUP) {
                return self::EXEMPT_HERE;
            }
            throw $e;
        }
    }

    /* The decision an EXEMPT_HERE key gets: accepted, nothing taken. */
    private function exemptHere(): array
    {
        return ['allowed' => true, 'remaining' => $this->limit, 'retryAfterNs' => 0, 'waitNs' => 0,
                'limit' => $this->limit, 'reset' => 0];
    }

    public function consume(int $tokens = 1): RateLimit
    {
        if ($tokens === 0 || ($tokens > $this->limit && $this->policy === 'sliding_window')) {
            /* Symfony: 0 tokens always pass; more than a sliding window's
             * limit never does (its token bucket and fixed window throw). */
            return $this->unchanged($tokens === 0);
        }
        $this->checkTokens($tokens);
        $d = $this->exempt === self::EXEMPT_HERE ? $this->exemptHere()
                                                 : $this->srl->acquire($this->key, $tokens);
        return $this->rateLimit($d, $d['allowed'], $d['retryAfterNs']);
    }

    public function reserve(int $tokens = 1, ?float $maxTime = null): Reservation
    {
        if ($this->policy === 'sliding_window') {
            throw new ReserveNotSupportedException(self::class . ' (policy sliding_window)');
        }
        if ($tokens === 0) {
            $rl = $this->unchanged(true);
            return new Reservation($this->last['at'], $rl);
        }
        $this->checkTokens($tokens);
        $maxNs = $maxTime === null ? self::WAIT_MAX_NS
            : (int)min(self::WAIT_MAX_NS, max(0.0, floor($maxTime * 1e9)));
        if ($this->exempt === self::EXEMPT_HERE) {
            $d = $this->exemptHere();
        } elseif ($this->policy === 'token_bucket') {
            $d = $this->srl->reserve($this->key, $maxNs, $tokens);
        } else {
            /* a window cannot hold a future admission: decide now */
            $d = $this->srl->acquire($this->key, $tokens) + ['waitNs' => 0];
        }
        if ($d['allowed']) {
            $wait = $d['waitNs'];
            /* Symfony: a reservation that must wait is not "accepted", and
             * nothing is left before it acts. */
            $rl = $wait === 0 ? $this->rateLimit($d, true, 0)
                              : $this->rateLimit(['remaining' => 0] + $d, false, $wait);
            return new Reservation($this->last['at'] + $wait / 1e9, $rl);
        }
        /* token_bucket: retry_after is until a reservation with this maxTime
         * passes; plus maxTime, it is until the tokens are free.  A window:
         * retry_after is until they are free. */
        $free = $d['retryAfterNs'] + ($this->policy === 'token_bucket' ? $maxNs : 0);
        if ($this->policy !== 'token_bucket' && $free <= $maxNs) {
            throw new ReserveNotSupportedException(self::class . " (policy {$this->policy}: "
                . 'a reservation that must wait)');
        }
        $rl = $this->rateLimit($d, false, $free);
        throw new MaxWaitDurationExceededException(sprintf(
            'The rate limiter wait time ("%d" seconds) is longer than the provided maximum time '
            . '("%d" seconds).', intdiv($free + 999999999, 1000000000), intdiv($maxNs, 1000000000)),
            $rl);
    }

    public function reset(): void
    {
        $this->srl->reset($this->key);
        if ($this->exempt === self::EXEMPT_SRL) {
            $this->srl->exempt($this->key);   /* forgetting the key forgot its exemption */
        }
    }

    /* srl's decision behind the last RateLimit (Srl::acquire()'s array, and
     * 'at': the wall clock, in seconds, its times count from); null before. */
    public function decision(): ?array
    {
        return $this->last;
    }

    /* Symfony's tokens > limit error (token_bucket, fixed_window). */
    private function checkTokens(int $tokens): void
    {
        if ($tokens < 0) {
            throw new \InvalidArgumentException(sprintf('Cannot consume a negative number of tokens (%d).',
                                                        $tokens));
        }
        if ($tokens > $this->limit) {
            throw new \InvalidArgumentException(sprintf(
                'Cannot reserve more tokens (%d) than the %s of the rate limiter (%d).', $tokens,
                $this->policy === 'token_bucket' ? 'burst size' : 'size', $this->limit));
        }
    }

    /* The key as it is, taking nothing (srl_peek; a key srl does not track is fresh). */
    private function unchanged(bool $accepted): RateLimit
    {
        $d = $this->srl->peek($this->key) ?? ['allowed' => true, 'remaining' => $this->limit - 1,
                                               'reset' => 0];
        /* peek answers for a request of 1: what is free now is one more if it passes */
        $d['remaining'] += $d['allowed'] ? 1 : 0;
        /* refused (above the limit): never passes; retry when the key is at rest */
        $d['retryAfterNs'] = $accepted ? 0 : $d['reset'] * 1000000000;
        return $this->rateLimit($d, $accepted, $d['retryAfterNs']);
    }

    /* RateLimit from srl decision $d, retryAfter $afterNs from now; keeps $d as decision(). */
    private function rateLimit(array $d, bool $accepted, int $afterNs): RateLimit
    {
        $at = microtime(true);
        $this->last = $d + ['at' => $at, 'exempt' => $this->exempt !== self::EXEMPT_NO];
        $us = (int)floor($at * 1e6) + intdiv($afterNs + 999, 1000);
        $when = \DateTimeImmutable::createFromFormat('U.u',
                                                     sprintf('%d.%06d', intdiv($us, 1000000), $us % 1000000));
        return new RateLimit($d['remaining'], $when, $accepted, $this->limit);
    }
}
