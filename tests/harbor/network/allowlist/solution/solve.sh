#!/bin/bash
curl -s -m 10 http://plain.test/oracle > allowed.txt
curl -s -m 10 http://refused.test/oracle > refused.txt
true
