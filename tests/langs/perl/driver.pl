# Conformance driver: the generated Perl parser over hex lines.
# Input, one case a line: "LAYOUT_ID HEX"; output one JSON object a line
# (tests/langs/README.md). The Perl runtime reports every problem with `die`
# and a message: the messages of a read past the end and of a failed check are
# parse errors; any other `die` is a crash and ends the process.
use strict;
use warnings;
use JSON::PP;
use IO::KaitaiStruct;
use LiftbridgeEnvelope;
use LiftbridgeCommitlog;

my $json = JSON::PP->new->canonical;
my $PARSE_ERROR = qr/^(Requested \d+ bytes, but only \d+ bytes available|Validation\w+Error: )/;

sub failure {
    my ($err) = @_;
    die $err unless $err =~ $PARSE_ERROR;
    chomp $err;
    return { ok => JSON::PP::false, error => $err };
}

sub stream { return IO::KaitaiStruct::Stream->new($_[0]) }

sub commitlog {
    my ($payload) = @_;
    my $cl = eval { LiftbridgeCommitlog->new(stream($payload)) };
    return failure($@) unless defined $cl;
    my @entries;
    for my $e (@{ $cl->entries() }) {
        my $b = $e->body();
        push @entries, {
            offset => "" . $e->offset(), timestamp => "" . $e->timestamp(),
            leader_epoch => "" . $e->leader_epoch(), size => 0 + $e->size(),
            crc32c => 0 + $b->crc32c(), magic => 0 + $b->magic(), attributes => 0 + $b->attributes(),
            key => $b->key_len() >= 0 ? unpack('H*', $b->key()) : undef,
            value => $b->value_len() >= 0 ? unpack('H*', $b->value()) : undef,
            headers => [map { [unpack('H*', $_->key()), unpack('H*', $_->value())] } @{ $b->headers() }],
        };
    }
    return { ok => JSON::PP::true, leader_epoch => "" . $cl->leader_epoch(),
             high_watermark => "" . $cl->high_watermark(), entries => \@entries };
}

sub parse {
    my ($data, $layout) = @_;
    my $env = eval { LiftbridgeEnvelope->new(stream($data), undef, undef, $layout) };
    return failure($@) unless defined $env;
    my $payload = $env->payload();
    my %res = (ok => JSON::PP::true, version => undef, header_len => undef, flags => undef,
               msg_type => undef, crc32c => undef, commitlog => undef,
               payload_offset => length($data) - length($payload), payload_len => length($payload));
    my $h = $env->header();
    if (defined $h) {
        @res{qw(version header_len flags msg_type)} =
            (0 + $h->version(), 0 + $h->header_len(), 0 + $h->flags(), 0 + $h->msg_type());
        $res{crc32c} = $h->has_crc() ? 0 + $env->crc32c() : undef;
        if ($env->layout() == $LiftbridgeEnvelope::LAYOUT_V0
                && $h->v0_msg_type() == $LiftbridgeEnvelope::V0_MSG_TYPE_REPLICATION_RESPONSE) {
            $res{commitlog} = commitlog($payload);
        }
    }
    return \%res;
}

binmode STDOUT;
while (my $line = <STDIN>) {
    $line =~ s/\s+$//;
    my ($layout, $hex) = split / /, $line, 2;
    next unless defined $layout && length $layout;
    print $json->encode(parse(pack('H*', $hex // ''), 0 + $layout)), "\n";
}
