#!/usr/bin/perl
# openapi_check — checks docs/openapi.yaml, and answers recorded from a
# running reapd against it, with JSON::Validator (Debian:
# libjson-validator-perl), which does the validating: the document against
# the OpenAPI 3.0 specification (shipped with the library, no network),
# each request's parameters and each response's status, headers and body
# against the operation the document gives for it.
#
#   openapi_check.pl DOC [CASES]
#
# CASES: one recorded exchange per line, tab-separated:
#
#   NAME  METHOD  TARGET  STATUS  HEADERS_FILE  BODY_FILE
#
# TARGET is the request target as sent (path and query), STATUS the status
# the test meant to provoke, HEADERS_FILE the answer's header block as curl
# -D writes it, BODY_FILE its body. For each: the status must be STATUS;
# the operation is looked up in the document by method and path (a path
# that matches none, or whose path parameters the document refuses, is
# `x-any-other-path`); the request's parameters are validated against it
# (a query parameter it does not list, or one given twice, is refused
# where the operation takes query parameters or says `x-query: refused`;
# a request the document refuses must not succeed, one it takes must not
# be answered 400); the status must be one the operation declares
# (`default` only for the HTTP layer's text/html answers); the headers and
# the body are validated against that response: a JSON body as one
# document, an NDJSON body line by line, a text body as a string; a body
# where the document has no content, or none where it has, is an error (a
# HEAD answer has none). Bodies are validated strictly (no type coercion);
# headers and query parameters, which are strings on the wire, with it.
#
# Prints one line per check ("ok N - ..." or "not ok N - ..." with the
# reasons), then which declared responses no case reached, then
# "N passed, N failed". Exits 0 when all passed, 1 otherwise, 2 on usage.
use strict;
use warnings;
use JSON::Validator;
use JSON::Validator::Util qw(negotiate_content_type);
use Mojo::JSON qw(decode_json);

if (@ARGV != 1 && @ARGV != 2) {
  print STDERR "usage: $0 DOC [CASES]\n";
  exit 2;
}
my ($doc, $cases) = @ARGV;
my ($n, $failed) = (0, 0);

sub report {
  my ($name, @problems) = @_;
  $n++;
  if (@problems) {
    $failed++;
    print "not ok $n - $name\n";
    print "#   $_\n" for @problems;
  }
  else {
    print "ok $n - $name\n";
  }
}

sub finish {
  my $passed = $n - $failed;
  print "$passed passed, $failed failed\n";
  exit($failed ? 1 : 0);
}

# ---- the document ---------------------------------------------------------

my $schema = eval { JSON::Validator->new->schema($doc)->schema };
if (!$schema) {
  report("$doc loads", "cannot load: " . ($@ =~ s/\s+$//r));
  finish();
}
my $kind = ref $schema;
report("$doc is an OpenAPI 3 document",
  $kind eq 'JSON::Validator::Schema::OpenAPIv3' ? () : "loaded as $kind");
report("$doc is valid against the OpenAPI " . ($schema->get('/openapi') // '?') . " specification",
  map {"$_"} @{$schema->errors});
finish() if $failed;

my @methods = qw(get head post put delete patch options);
my $paths   = $schema->get('/paths');
my %declared;    # "METHOD PATH STATUS" => reached
for my $p (sort keys %$paths) {
  for my $m (@methods) {
    # Named operations only: the others answer "not taken" (405). A HEAD
    # with the GET's very responses counts as that GET.
    my $op = $schema->get([paths => $p, $m]) or next;
    next unless $op->{operationId};
    next if $m eq 'head' && $op->{responses} == ($schema->get([paths => $p, 'get', 'responses']) // 0);
    $declared{"\U$m\E $p $_"} = 0 for grep { $_ ne 'default' } keys %{$op->{responses}};
  }
}
my @routes = map {
  my $p     = $_;
  my @names = $p =~ /\{([^}]+)\}/g;
  my $re    = join '', map { /^\{/ ? '([^/]+)' : quotemeta } split /(\{[^}]+\})/, $p;
  {path => $p, names => \@names, re => qr/^$re$/, templated => scalar @names}
} sort keys %$paths;
my $ops = scalar(keys %declared);
report("$doc: " . scalar(@routes) . " paths, $ops responses declared",
  @routes ? () : 'no paths');

# A path that is no route: x-any-other-path's responses, for every method,
# as one more path (after the document was validated).
my $OTHER = '(any other path)';
my $other = $schema->get('/x-any-other-path/responses');
if ($cases) {
  report("$doc: x-any-other-path has responses", $other ? () : 'missing');
  $paths->{$OTHER}{$_} = {responses => $other} for @methods;
}
finish() unless $cases;

# ---- the cases ------------------------------------------------------------

sub slurp {
  my ($file) = @_;
  open my $fh, '<:raw', $file or return undef;
  local $/;
  my $s = <$fh>;
  return $s // '';
}

# The last header block of curl -D: (status, {lc name => value}).
sub parse_headers {
  my ($text) = @_;
  my @blocks = grep {/\S/} split /\r?\n\r?\n/, $text;
  return (undef, {}) unless @blocks;
  my @lines = split /\r?\n/, $blocks[-1];
  my ($status) = (shift(@lines) // '') =~ m{^HTTP/\S+ (\d{3})};
  my %h;
  for (@lines) {
    my ($k, $v) = /^([^:]+):[ \t]*(.*?)[ \t]*$/ or next;
    $h{lc $k} = exists $h{lc $k} ? "$h{lc $k}, $v" : $v;
  }
  return ($status, \%h);
}

sub unescape {
  my ($s) = @_;
  $s =~ tr/+/ /;
  $s =~ s/%([0-9A-Fa-f]{2})/chr hex $1/ge;
  return $s;
}

# The route of a path: (template, {name => value}) or () when none.
sub route_of {
  my ($path) = @_;
  for my $r ((grep { !$_->{templated} } @routes), (grep { $_->{templated} } @routes)) {
    my @v = $path =~ $r->{re} or next;
    @v = () unless $r->{templated};
    my %params;
    @params{@{$r->{names}}} = map { unescape($_) } @v;
    return ($r->{path}, \%params);
  }
  return ();
}

# The query parameters an operation takes (path-level ones too).
sub query_params {
  my ($template, $method) = @_;
  my $params = $schema->parameters_for_request([$method, $template]) || [];
  return {map { ($_->{name} => $_) } grep { $_->{in} eq 'query' } @$params};
}

# Request checks: the list of the document's objections (empty: valid).
sub request_problems {
  my ($template, $method, $path_params, $query) = @_;
  my (%q, @problems);
  my $known = query_params($template, $method);
  my $refuses = ($schema->get([paths => $template, $method, 'x-query']) // '') eq 'refused';
  for my $pair (grep { length } split /&/, $query // '') {
    my ($k, $v) = split /=/, $pair, 2;
    $k = unescape($k);
    # An operation without query parameters ignores the query, unless
    # the document says it refuses any.
    next unless %$known || $refuses;
    push @problems, "query parameter $k not in the document" unless $known->{$k};
    push @problems, "query parameter $k given twice" if exists $q{$k};
    $q{$k} = unescape($v // '');
  }
  $schema->coerce('booleans,numbers,strings');
  push @problems, map {"$_"} $schema->validate_request([$method, $template], {path => $path_params, query => \%q});
  return @problems;
}

# Response checks: the list of problems (empty: it matches).
sub response_problems {
  my ($template, $method, $status, $hdr, $body, $is_head) = @_;
  my @at   = (paths => $template, $method, 'responses');
  my $ctype = $hdr->{'content-type'};
  # `default` only for the HTTP layer's own text/html answers.
  my $key = $schema->get([@at, $status]) ? $status : 'default';
  return "status $status is not declared for \U$method\E $template"
    unless $schema->get([@at, $key])
    && ($key ne 'default' || ($ctype && negotiate_content_type(['text/html'], $ctype)));
  my @problems;
  my @accepts = sort keys %{$schema->get([@at, $key, 'content']) || {}};
  my $has     = length($body) > 0;
  push @problems, "a HEAD answer with a body" if $is_head && $has;
  push @problems, "a body, and the document declares no content for $status" if $has && !@accepts;
  push @problems, "no body, and the document declares @accepts for $status"
    if !$has && !$is_head && @accepts;
  push @problems, "no Content-Type, and the document declares @accepts for $status"
    if @accepts && !$ctype && ($has || $is_head);
  my $media = @accepts && $ctype ? negotiate_content_type(\@accepts, $ctype) : '';
  my $headers = sub {
    my ($name) = @_;
    return {exists => exists $hdr->{lc $name}, value => $hdr->{lc $name}};
  };

  # Headers and the Content-Type against the declared media types, with
  # coercion (a header is a string on the wire).
  $schema->coerce('booleans,numbers,strings');
  push @problems, map {"$_"} $schema->validate_response([$method, $template, $status],
    {header => $headers, body => sub { {exists => 0, content_type => $ctype} }});
  return @problems if !$has || !$media;

  # The body, strictly: each value as it was sent.
  my @values;
  if ($media =~ m{^application/(?:[\w.+-]+\+)?json$}) {
    my $v = eval { decode_json($body) };
    return @problems, "the body is not JSON: " . ($@ =~ s/\s+$//r) if $@;
    @values = ($v);
  }
  elsif ($media eq 'application/x-ndjson') {
    return @problems, "the NDJSON body does not end with a newline" unless $body =~ /\n\z/;
    my $line = 0;
    for my $l (split /\n/, $body) {
      $line++;
      next unless length $l;
      my $v = eval { decode_json($l) };
      return @problems, "NDJSON line $line is not JSON: " . ($@ =~ s/\s+$//r) if $@;
      push @values, $v;
    }
    return @problems, "the NDJSON body has no line" unless @values;
  }
  else {
    @values = ($body);
  }
  $schema->coerce({});
  my $i = 0;
  for my $v (@values) {
    $i++;
    my @e = grep { $_->path =~ m{^/body} } $schema->validate_response([$method, $template, $status],
      {header => $headers, body => sub { {exists => 1, value => $v, content_type => $media} }});
    push @problems, map { (@values > 1 ? "line $i: " : '') . "$_" } @e;
  }
  return @problems;
}

open my $fh, '<', $cases or die "$0: $cases: $!\n";
while (my $line = <$fh>) {
  chomp $line;
  next if $line =~ /^\s*(#|$)/;
  my ($name, $method, $target, $want, $hfile, $bfile) = split /\t/, $line;
  if (!defined $bfile) {
    report("$cases: $line", 'not 6 tab-separated fields');
    next;
  }
  my $m = lc $method;
  my ($path, $query) = split /\?/, $target, 2;
  my ($status, $hdr) = parse_headers(slurp($hfile) // '');
  my $body  = slurp($bfile) // '';
  my $label = "$name: $method $target -> " . ($status // 'nothing');
  my @problems;
  if (!defined $status) {
    report($label, "no answer recorded in $hfile");
    next;
  }
  push @problems, "status $status, the test meant $want" if $status ne $want;

  my ($template, $path_params) = route_of($path);
  my @req;
  if ($template) {
    @req = request_problems($template, $m, $path_params, $query);
    # Path parameters the document refuses: no route, as reapd says.
    my @names = keys %$path_params;
    if (grep { my $e = $_; grep { $e =~ m{^/\Q$_\E(?:[/:]|$)} } @names } @req) {
      ($template, @req) = ($OTHER);
    }
  }
  else {
    $template = $OTHER;
  }
  if ($template ne $OTHER && !$schema->get([paths => $template, $m])) {
    push @problems, "no \U$m\E operation on $template in the document";
    report($label, @problems);
    next;
  }
  push @problems, "the document refuses the request (@req) and reapd answered $status"
    if @req && $status =~ /^2/;
  push @problems, "the document takes the request and reapd answered 400: $body"
    if !@req && $status eq '400' && $template ne $OTHER;
  push @problems, response_problems($template, $m, $status, $hdr, $body, $m eq 'head');
  my ($key) = grep { exists $declared{$_} } map {"\U$_\E $template $status"} $m, ($m eq 'head' ? 'get' : ());
  $declared{$key}++ if $key;
  report("$label ($template)", @problems);
}
close $fh;

my @unreached = grep { !$declared{$_} } sort keys %declared;
print "# responses reached: ", scalar(grep { $declared{$_} } keys %declared), " of $ops declared\n";
print "# not reached: $_\n" for @unreached;
finish();
