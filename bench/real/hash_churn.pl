# hash_churn.pl: a Perl run for bench/real/realprog.c: a hash of N string
# values of 1..100 bytes, every other key deleted, then an array of N
# two-element arrays. Perl takes all of it from malloc (Debian's perl uses
# the system allocator).
# Usage: perl hash_churn.pl N
# Prints: "<keys left> <total length of their values> <array length>"
use strict;
use warnings;

my $n = $ARGV[0];
my %h;
for my $i (1 .. $n) { $h{"key$i"} = ("v" x ($i % 100)) . $i; }
for my $i (1 .. $n) { delete $h{"key$i"} if $i % 2; }
my $len = 0;
$len += length($h{$_}) for keys %h;
my @a = map { [$_, "s$_"] } 1 .. $n;
print scalar(keys %h), " $len ", scalar(@a), "\n";
