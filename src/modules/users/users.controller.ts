import { Body, Controller, Get, HttpCode, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { Access, CurrentPrincipal, Principal } from '../../common/auth/principal';
import { CreateUserDto, UserView, UserWithToken } from './dto/user.dto';
import { UsersService } from './users.service';

@ApiTags('users')
@ApiBearerAuth()
@Controller('api/v1/users')
export class UsersController {
  constructor(private readonly users: UsersService) {}

  /** Global admins create users and service accounts; the token is shown only in this response. */
  @Post()
  @Access('admin')
  create(@Body() body: CreateUserDto): Promise<UserWithToken> {
    return this.users.createUser(body.name, body.global_role);
  }

  @Get('me')
  @Access('user')
  me(@CurrentPrincipal() principal: Principal): Promise<UserView> {
    return this.users.me(principal);
  }

  @Post('me/tokens')
  @HttpCode(201)
  @Access('user')
  issueToken(@CurrentPrincipal() principal: Principal): Promise<{ token: string }> {
    return this.users.issueToken(principal);
  }
}
