<?php
/*
 * SrlRateLimiterFactory.php - Symfony RateLimiter's factory, with srl as the store.
 *
 * Takes the array Symfony's RateLimiterFactory takes (framework.yaml's
 * rate_limiter section: id, policy, limit, interval, rate), validated by the
 * same OptionsResolver definitions, and create($key) returns a
 * LimiterInterface whose consume() / reserve() / reset() answer Symfony's
 * own RateLimit and Reservation objects.  The counts live in one srl
 * segment per (id, policy), shared by every process of the host (every
 * php-fpm worker), where Symfony's InMemoryStorage keeps them per request
 * and its CacheStorage needs a lock per key and a cache server.
 *
 *     $factory = new SrlRateLimiterFactory(['id' => 'login', 'policy' => 'fixed_window',
 *                                           'limit' => 5, 'interval' => '15 minutes']);
 *     $limit = $factory->create($request->getClientIp())->consume(1);
 *
 * The mapping (php/README.md, "Symfony RateLimiter", says where the
 * decisions differ from Symfony's own limiters):
 *   token_bucket   token_bucket:AMOUNT/INTERVAL,burst=LIMIT (reserve waits)
 *   sliding_window sliding_counter:LIMIT/INTERVAL (Symfony's weighted count)
 *   fixed_window   fixed_window:LIMIT/INTERVAL (the window opens at the first hit)
 *   no_limit       Symfony's own NoLimiter (no segment)
 * Intervals are Symfony's relative-time strings ('15 minutes', '1 hour'),
 * read as Symfony reads them (DateTimeImmutable::modify) in whole seconds,
 * but from one fixed instant (1970-01-01 UTC) instead of now, so every
 * worker derives the same policy: '1 month' is 31 days, '1 year' 365.
 *
 * The segment is opened (created by the first process, Srl::CREATE) at the
 * first create(), once per factory; each limiter's srl key is Symfony's own
 * storage key, "ID-KEY".  Nothing here touches FFI: Srl.php does, so under
 * php-fpm with ffi.enable=preload only Srl.php needs to be preloaded.
 *
 * Exemptions (option 'exempt', a list): each entry is an address or range
 * ('10.0.0.0/8', '::1', '2001:db8::/32', read by Srl::cidr) or else an
 * exact key ('partner-api-key').  create($key) of an exempt key gives a
 * limiter that is never refused: its srl key is marked exempt in the
 * segment (srl_key_exempt, once per factory and key), so its decisions
 * are counted (stats()['exempt'], rlctl metrics srl_exempt_total) and a
 * ban by hand (rlctl ban) still wins.  A key that is an address in a
 * range is decided under the range's key, "ID exempt 10.0.0.0/8": one slot
 * per range, however many addresses use it (an exempt slot is never
 * evicted, so one per address could fill the table); no Symfony key, always
 * "ID-KEY", is spelled so.  On a store that keeps no
 * exemptions (redis=) an exempt key is accepted without asking srl, and
 * not counted.
 */
declare(strict_types=1);

namespace Srl\Symfony;

use Symfony\Component\OptionsResolver\Options;
use Symfony\Component\OptionsResolver\OptionsResolver;
use Symfony\Component\RateLimiter\LimiterInterface;
use Symfony\Component\RateLimiter\Policy\NoLimiter;

final class SrlRateLimiterFactory
{
    /* Symfony policy => srl algorithm.  srl's fixed_window opens its window
     * at a key's first hit, as Symfony's does. */
    private const ALGORITHM = [
        'token_bucket' => 'token_bucket',
        'sliding_window' => 'sliding_counter',
        'fixed_window' => 'fixed_window',
    ];

    /* Options of this factory beside Srl's own (which Srl checks). */
    private const OWN_OPTIONS = ['capacity', 'name', 'exempt'];

    private array $config;
    private array $options;
    private ?string $policy = null;   /* srl's policy text; null for no_limit */
    private string $name = '';
    private int $capacity;
    private ?\Srl $srl = null;
    private array $exemptKeys = [];     /* exact key => true */
    private array $exemptRanges = [];   /* srl's form of each range ('10.0.0.0/8') */
    private array $exempted = [];       /* srl key => SrlLimiter::EXEMPT_* once marked */

    /*
     * $config: Symfony's limiter config (id and policy required; limit for
     * every policy but no_limit; interval for the windows; rate =>
     * ['interval' => ..., 'amount' => 1] for token_bucket).  Unknown or
     * mistyped keys throw OptionsResolver's exceptions, as Symfony's own
     * factory does.  $options: capacity (keys the segment holds, default
     * 65536), name (the segment, default "/symfony.ID.POLICY"), exempt
     * (keys and address ranges never refused: the file's head), and Srl's
     * options (key_display, on_full, mode, flags, dry_run), passed on.
     */
    public function __construct(array $config, array $options = [])
    {
        $resolver = new OptionsResolver();
        self::configureOptions($resolver);
        $this->config = $resolver->resolve($config);
        $this->capacity = (int)($options['capacity'] ?? 65536);
        $this->name = (string)($options['name'] ?? self::segmentName($this->config['id'],
                                                                      $this->config['policy']));
        $this->options = array_diff_key($options, array_flip(self::OWN_OPTIONS));
        $this->policy = self::policyOf($this->config);
        $this->exemptions($options['exempt'] ?? []);
    }

    /* Sort 'exempt' entries into ranges and exact keys.  An entry that
     * starts as an address ('10.0.0.1/8': bits set past the prefix; '::1/129')
     * but is no range throws, naming it: taken as a key it would exempt
     * nothing, silently. */
    private function exemptions(mixed $list): void
    {
        if (!is_array($list) || !array_is_list($list)) {
            throw new \InvalidArgumentException(sprintf(
                'rate limiter "%s": exempt must be a list of keys and address ranges '
                . '([\'10.0.0.0/8\', \'::1\', \'partner-key\']), got %s', $this->config['id'],
                get_debug_type($list)));
        }
        foreach ($list as $e) {
            if (!is_string($e) || $e === '') {
                throw new \InvalidArgumentException(sprintf(
                    'rate limiter "%s": exempt entries are non-empty strings (a key or an '
                    . 'address range), got %s', $this->config['id'], var_export($e, true)));
            }
            $addr = explode('/', $e, 2)[0];
            if (filter_var($addr, FILTER_VALIDATE_IP) === false) {
                $this->exemptKeys[$e] = true;
                continue;
            }
            try {
                $this->exemptRanges[] = \Srl::cidr($e);
            } catch (\SrlException $x) {
                throw new \InvalidArgumentException(sprintf('rate limiter "%s": exempt: %s',
                                                            $this->config['id'],
                                                            substr($x->getMessage(), 5)), 0, $x);
            }
        }
    }

    /* Which exemption $key has: [srl key, SrlLimiter::EXEMPT_*]. */
    private function exemptionOf(?string $key): array
    {
        $srlKey = $this->config['id'] . '-' . $key;
        if ($key === null || ($this->exemptKeys === [] && $this->exemptRanges === [])) {
            return [$srlKey, SrlLimiter::EXEMPT_NO];
        }
        if (!isset($this->exemptKeys[$key])) {
            $range = null;
            if ($this->exemptRanges !== [] && filter_var($key, FILTER_VALIDATE_IP) !== false) {
                foreach ($this->exemptRanges as $r) {
                    if (\Srl::cidrMatch($r, $key)) {
                        $range = $r;
                        break;
                    }
                }
            }
            if ($range === null) {
                return [$srlKey, SrlLimiter::EXEMPT_NO];
            }
            /* "ID exempt RANGE": never a Symfony key, which is always "ID-KEY" */
            $srlKey = $this->config['id'] . ' exempt ' . $range;
        }
        return [$srlKey, $this->exempted[$srlKey] ??= SrlLimiter::markExempt($this->srl, $srlKey)];
    }

    /* A limiter for $key (Symfony's create(): ids combine as "ID-KEY"). */
    public function create(?string $key = null): LimiterInterface
    {
        if ($this->policy === null) {
            return new NoLimiter();
        }
        $this->srl ??= new \Srl($this->name, $this->policy, $this->capacity, $this->options);
        [$srlKey, $exempt] = $this->exemptionOf($key);
        return new SrlLimiter($this->srl, $srlKey, $this->config['policy'], $this->config['limit'],
                              $exempt);
    }

    /* The srl policy text the config maps to (null for no_limit). */
    public function srlPolicy(): ?string
    {
        return $this->policy;
    }

    /* The segment the limiters share. */
    public function segment(): string
    {
        return $this->name;
    }

    /* "/symfony.ID.POLICY"; an id with other bytes than [A-Za-z0-9._-], or
     * a long one, is cut and given a hash of the whole id, so two ids never
     * share a segment by their cleaned spelling. */
    private static function segmentName(string $id, string $policy): string
    {
        $clean = preg_replace('/[^A-Za-z0-9._-]/', '_', $id);
        if ($clean !== $id || $id === '' || strlen($id) > 150) {
            $clean = substr($clean, 0, 100) . '.' . substr(sha1($id), 0, 12);
        }
        return "/symfony.$clean.$policy";
    }

    private static function policyOf(array $c): ?string
    {
        if ($c['policy'] === 'no_limit') {
            return null;
        }
        $c += ['limit' => null, 'interval' => null];   /* absent when not given */
        if (!is_int($c['limit']) || $c['limit'] < 1) {
            throw new \InvalidArgumentException(sprintf(
                'rate limiter "%s": limit must be at least 1 (policy %s), got %s',
                $c['id'], $c['policy'], var_export($c['limit'], true)));
        }
        $algo = self::ALGORITHM[$c['policy']];
        if ($c['policy'] === 'token_bucket') {
            if ($c['rate'] === null) {
                throw new \InvalidArgumentException(sprintf(
                    'rate limiter "%s": token_bucket needs rate => [\'interval\' => ..., \'amount\' => N]',
                    $c['id']));
            }
            [$seconds, $amount] = $c['rate'];
            if ($amount < 1) {
                throw new \InvalidArgumentException(sprintf(
                    'rate limiter "%s": rate amount must be at least 1, got %d', $c['id'], $amount));
            }
            return "$algo:$amount/{$seconds}s" . ($amount === $c['limit'] ? '' : ",burst={$c['limit']}");
        }
        if ($c['interval'] === null) {
            throw new \InvalidArgumentException(sprintf(
                'rate limiter "%s": %s needs an interval (e.g. \'15 minutes\')', $c['id'], $c['policy']));
        }
        return "$algo:{$c['limit']}/{$c['interval']}s";
    }

    /* Symfony 5.4's RateLimiterFactory::configureOptions, but intervals
     * become whole seconds (see the file's head) and rate [seconds, amount]. */
    private static function configureOptions(OptionsResolver $options): void
    {
        $seconds = static function (Options $options, string $interval): int {
            return self::intervalSeconds($interval);
        };
        $options
            ->define('id')->required()->allowedTypes('string')
            ->define('policy')->required()
                ->allowedValues('token_bucket', 'fixed_window', 'sliding_window', 'no_limit')
            ->define('limit')->allowedTypes('int')
            ->define('interval')->allowedTypes('string')->normalize($seconds)
            ->define('rate')
                ->default(function (OptionsResolver $rate) use ($seconds) {
                    $rate
                        ->define('amount')->allowedTypes('int')->default(1)
                        ->define('interval')->allowedTypes('string')->normalize($seconds);
                })
                ->normalize(function (Options $options, $value) {
                    return isset($value['interval']) ? [$value['interval'], $value['amount']] : null;
                });
    }

    /* '15 minutes' => 900: DateTimeImmutable::modify('+15 minutes') from
     * 1970-01-01 UTC; at least 1 s, at most srl's longest window. */
    public static function intervalSeconds(string $interval): int
    {
        $epoch = new \DateTimeImmutable('@0');
        try {
            $then = @$epoch->modify('+' . $interval);
        } catch (\Throwable $e) {   /* PHP 8.3+: DateMalformedStringException */
            $then = false;
        }
        if ($then === false) {
            throw new \LogicException(sprintf('Cannot parse interval "%s", please use a valid unit '
                . 'as described on https://www.php.net/datetime.formats.relative.', $interval));
        }
        $s = $then->getTimestamp();
        if ($s < 1 || $s > 3660 * 86400) {
            throw new \InvalidArgumentException(sprintf(
                'interval "%s" is %d seconds: srl takes 1 second .. 3660 days', $interval, $s));
        }
        return $s;
    }
}
