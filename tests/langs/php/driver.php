<?php
// Conformance driver: the generated PHP parser over hex lines.
// Usage: php driver.php RUNTIME_LIB GENERATED_DIR < cases
// Input, one case a line: "LAYOUT_ID HEX"; output one JSON object a line
// (tests/langs/README.md). Parse errors are the runtime's (KaitaiError and its
// subclasses: validation, end of stream); anything else is a crash.
declare(strict_types=1);

[$_, $runtime, $generated] = $argv;
spl_autoload_register(function (string $class) use ($runtime): void {
    $path = $runtime . '/' . str_replace('\\', '/', $class) . '.php';
    if (is_file($path)) {
        require_once $path;
    }
});
require_once $generated . '/LiftbridgeEnvelope.php';
require_once $generated . '/LiftbridgeCommitlog.php';

use Kaitai\Struct\Error\KaitaiError;
use Kaitai\Struct\Stream;

function failure(Throwable $e): array {
    return ['ok' => false, 'error' => get_class($e) . ': ' . $e->getMessage()];
}

// PHP integers are signed 64-bit: u8 values above 2^63-1 come back negative.
function u64(int $v): string {
    return sprintf('%u', $v);
}

function commitlog(string $payload): array {
    try {
        $cl = new LiftbridgeCommitlog(new Stream($payload));
        $entries = [];
        foreach ($cl->entries() as $e) {
            $b = $e->body();
            $entries[] = [
                'offset' => u64($e->offset()), 'timestamp' => (string) $e->timestamp(),
                'leader_epoch' => u64($e->leaderEpoch()), 'size' => $e->size(),
                'crc32c' => $b->crc32c(), 'magic' => $b->magic(), 'attributes' => $b->attributes(),
                'key' => $b->keyLen() >= 0 ? bin2hex($b->key()) : null,
                'value' => $b->valueLen() >= 0 ? bin2hex($b->value()) : null,
                'headers' => array_map(fn($h) => [bin2hex($h->key()), bin2hex($h->value())], $b->headers()),
            ];
        }
        return ['ok' => true, 'leader_epoch' => u64($cl->leaderEpoch()),
                'high_watermark' => (string) $cl->highWatermark(), 'entries' => $entries];
    } catch (KaitaiError $e) {
        return failure($e);
    }
}

function parse(string $data, int $layout): array {
    try {
        $env = new LiftbridgeEnvelope($layout, new Stream($data));
    } catch (KaitaiError $e) {
        return failure($e);
    }
    $res = ['ok' => true, 'version' => null, 'header_len' => null, 'flags' => null,
            'msg_type' => null, 'crc32c' => null,
            'payload_offset' => strlen($data) - strlen($env->payload()),
            'payload_len' => strlen($env->payload()), 'commitlog' => null];
    $h = $env->header();
    if ($h !== null) {
        $res['version'] = $h->version();
        $res['header_len'] = $h->headerLen();
        $res['flags'] = $h->flags();
        $res['msg_type'] = $h->msgType();
        $res['crc32c'] = $h->hasCrc() ? $env->crc32c() : null;
        if ($env->layout() === \LiftbridgeEnvelope\Layout::V0
                && $h->v0MsgType() === \LiftbridgeEnvelope\V0MsgType::REPLICATION_RESPONSE) {
            $res['commitlog'] = commitlog($env->payload());
        }
    }
    return $res;
}

while (($line = fgets(STDIN)) !== false) {
    $parts = explode(' ', trim($line), 2);
    if ($parts[0] === '') {
        continue;
    }
    $data = hex2bin($parts[1] ?? '');
    echo json_encode(parse($data === false ? '' : $data, (int) $parts[0]), JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE), "\n";
}
