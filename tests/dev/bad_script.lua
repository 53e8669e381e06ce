-- bad_script.lua - a fixture for check_lua_scripts.sh: does not parse (an
-- if without end), so the check must fail on it.
if ARGV[1] == "a" then return {1}
