#!/bin/bash
echo one > one.txt
