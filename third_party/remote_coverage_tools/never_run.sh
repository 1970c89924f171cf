#!/bin/sh
echo "remote_coverage_tools is an offline stand-in; coverage is not supported" >&2
exit 1
